// Error codes, their names and strings, and the per-thread detail of the last failure.
#include <string>

#include "internal.h"

namespace emu {

static std::string& last_message() {
  thread_local std::string message;
  return message;
}

emuError_t fail(emuError_t code, const std::string& message) {
  last_message() = message;
  return code;
}

emuError_t succeed() {
  return emuSuccess;
}

} // namespace emu

extern "C" {

const char* emuGetErrorName(emuError_t error) {
  switch (error) {
    case emuSuccess:
      return "emuSuccess";
    case emuErrorInvalidValue:
      return "emuErrorInvalidValue";
    case emuErrorMemoryAllocation:
      return "emuErrorMemoryAllocation";
    case emuErrorInvalidDevice:
      return "emuErrorInvalidDevice";
    case emuErrorInvalidDevicePointer:
      return "emuErrorInvalidDevicePointer";
    case emuErrorInvalidResourceHandle:
      return "emuErrorInvalidResourceHandle";
    case emuErrorNotReady:
      return "emuErrorNotReady";
    case emuErrorNotPermitted:
      return "emuErrorNotPermitted";
    case emuErrorLaunchFailure:
      return "emuErrorLaunchFailure";
    case emuErrorInitialization:
      return "emuErrorInitialization";
#if EMU_DRIVER_HAS_COMM
    case emuErrorCommFailure:
      return "emuErrorCommFailure";
    case emuErrorStreamCaptureUnsupported:
      return "emuErrorStreamCaptureUnsupported";
    case emuErrorStreamCaptureInvalidated:
      return "emuErrorStreamCaptureInvalidated";
#endif
  }
  return "emuErrorUnknown";
}

const char* emuGetErrorString(emuError_t error) {
  switch (error) {
    case emuSuccess:
      return "no error";
    case emuErrorInvalidValue:
      return "invalid argument";
    case emuErrorMemoryAllocation:
      return "out of device memory";
    case emuErrorInvalidDevice:
      return "invalid device ordinal";
    case emuErrorInvalidDevicePointer:
      return "invalid device pointer";
    case emuErrorInvalidResourceHandle:
      return "invalid resource handle";
    case emuErrorNotReady:
      return "device not ready";
    case emuErrorNotPermitted:
      return "operation not permitted";
    case emuErrorLaunchFailure:
      return "kernel launch failure";
    case emuErrorInitialization:
      return "initialization error";
#if EMU_DRIVER_HAS_COMM
    case emuErrorCommFailure:
      return "communicator failure";
    case emuErrorStreamCaptureUnsupported:
      return "operation not permitted when stream is capturing";
    case emuErrorStreamCaptureInvalidated:
      return "operation failed due to a previous error during capture";
#endif
  }
  return "unknown error";
}

const char* emuGetLastErrorMessage(void) {
  return emu::last_message().c_str();
}

} // extern "C"
