// Device traces for torch.profiler (ProfilerActivity.PrivateUse1): a Kineto activity profiler over the driver's
// activity tracing (API 2.4). While a profile runs, each kernel, copy, memset and collective a stream runs is
// recorded by the driver with the correlation id of the CPU op that queued it (Kineto pushes it on the op's thread);
// at the end of the profile the records become Kineto device activities linked to their CPU ops, so they carry
// device time in key_averages() and sit on the device's own track in export_chrome_trace. Registered through
// torch's PrivateUse1 profiler registry (torch 2.13 and later); elsewhere, or on a driver API before 2.4, there is none
// and device_traces_available() says why.
// Its own unit (csrc/profiler/ is not merged with other sources): Kineto's GenericTraceActivity formats with fmt,
// whose compiled part libtorch does not export, so fmt is header-only here, before anything includes it.
#define FMT_HEADER_ONLY
#include <emu_driver.h>
#include <torch/library.h>

#include <string>

#if EMU_DRIVER_HAS_TRACING && __has_include(<torch/csrc/profiler/standalone/privateuse1_profiler.h>) && \
    __has_include(<IActivityProfiler.h>)
#define EMU_DEVICE_TRACES 1
#ifndef USE_KINETO
#define USE_KINETO // the registry's header declares it only for Kineto builds, which every torch wheel is
#define EMU_DEFINED_USE_KINETO
#endif
#include <IActivityProfiler.h>
#include <libkineto.h>
#include <output_base.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>
#ifdef EMU_DEFINED_USE_KINETO
#undef USE_KINETO
#undef EMU_DEFINED_USE_KINETO
#endif

#include <algorithm>
#include <memory>
#include <set>
#include <utility>
#include <vector>
#else
#define EMU_DEVICE_TRACES 0
#endif

namespace torch_emu {

#if EMU_DEVICE_TRACES
namespace {

libkineto::ActivityType activity_type(emuActivityKind kind) {
  switch (kind) {
    case emuActivityMemcpy:
      return libkineto::ActivityType::GPU_MEMCPY;
    case emuActivityMemset:
      return libkineto::ActivityType::GPU_MEMSET;
    case emuActivityKernel:
    case emuActivityCollective:
      break;
  }
  return libkineto::ActivityType::CONCURRENT_KERNEL; // as NCCL's collectives are kernels
}

class EmuTraceSession final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    drain(); // what an earlier, abandoned profile left
    emuTraceStart();
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    emuTraceStop(); // work queued before this is recorded once it has run (torch synchronizes the device first)
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override {
    return errors_;
  }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, nullptr, 0, 0);
  }

  void processTrace(
      libkineto::ActivityLogger& logger,
      libkineto::getLinkedActivityCallback linked,
      int64_t window_start,
      int64_t window_end) override {
    std::vector<emuActivityRecord> records = drain();
    int64_t first = window_start, last = window_end;
    for (const auto& r : records) {
      first = first == 0 ? r.start_ns : std::min(first, r.start_ns);
      last = std::max(last, r.end_ns);
    }
    buffer_->span = libkineto::TraceSpan(first, last, "emu");
    for (const auto& r : records) {
      if (window_end > window_start && (r.end_ns < window_start || r.start_ns > window_end))
        continue;
      buffer_->emplace_activity(buffer_->span, activity_type(r.kind), std::string(r.name));
      auto& activity = libkineto::CpuTraceBuffer::toRef(buffer_->activities.back());
      activity.startTime = r.start_ns;
      activity.endTime = r.end_ns;
      activity.device = r.device;
      activity.resource = static_cast<int64_t>(r.stream);
      activity.id = static_cast<int32_t>(r.correlation);
      activity.flow.id = static_cast<uint32_t>(r.correlation);
      activity.flow.type = libkineto::kLinkAsyncCpuGpu;
      activity.flow.start = false;
      if (linked && r.correlation != 0)
        activity.linked = linked(static_cast<int32_t>(r.correlation));
      activity.addMetadata("device", std::to_string(r.device));
      activity.addMetadata("stream", std::to_string(r.stream));
      activity.addMetadata("correlation", std::to_string(r.correlation));
      // How long it waited in its stream's queue: the trace shows it starting, this says when its op queued it.
      activity.addMetadata("waited us", std::to_string(static_cast<double>(r.start_ns - r.queued_ns) / 1000.0));
      const auto stream = std::make_pair(static_cast<int64_t>(r.device), static_cast<int64_t>(r.stream));
      if (std::find(streams_.begin(), streams_.end(), stream) == streams_.end())
        streams_.push_back(stream);
      logger.handleActivity(activity);
    }
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    const int64_t device = streams_.empty() ? 0 : streams_.front().first;
    return std::make_unique<libkineto::DeviceInfo>(
        libkineto::DeviceInfo{device, device, "emu " + std::to_string(device), "emu " + std::to_string(device)});
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> infos;
    for (const auto& [device, stream] : streams_)
      infos.push_back(libkineto::ResourceInfo{
          stream, stream, device, stream == 0 ? "stream 0 (default)" : "stream " + std::to_string(stream)});
    return infos;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return std::move(buffer_);
  }

  void pushCorrelationId(uint64_t id) override {
    emuTracePushCorrelation(id);
  }

  void popCorrelationId() override {
    emuTracePopCorrelation();
  }

 private:
  std::vector<emuActivityRecord> drain() {
    std::vector<emuActivityRecord> records;
    std::vector<emuActivityRecord> chunk(4096);
    for (;;) {
      size_t count = 0;
      uint64_t dropped = 0;
      if (emuTraceRead(chunk.data(), chunk.size(), &count, &dropped) != emuSuccess)
        break;
      if (dropped > 0)
        errors_.push_back(
            "emu: " + std::to_string(dropped) + " device activities were dropped (more than " +
            std::to_string(EMU_TRACE_CAPACITY) + " unread in the driver)");
      records.insert(records.end(), chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(count));
      if (count < chunk.size())
        break;
    }
    return records;
  }

  // On the heap from the start: activities point at its span, which must not move when Kineto takes the buffer.
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
  std::vector<std::pair<int64_t, int64_t>> streams_; // (device, stream) pairs seen, for the trace's rows
  std::vector<std::string> errors_;
};

class EmuActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override {
    return name_;
  }

  const std::set<libkineto::ActivityType>& availableActivities() const override {
    return activities_;
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<libkineto::ActivityType>& /*activity_types*/,
      const libkineto::Config& /*config*/) override {
    return std::make_unique<EmuTraceSession>();
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t /*ts_ms*/,
      int64_t /*duration_ms*/,
      const std::set<libkineto::ActivityType>& activity_types,
      const libkineto::Config& config) override {
    return configure(activity_types, config);
  }

 private:
  std::string name_ = "emu";
  std::set<libkineto::ActivityType> activities_ = {
      libkineto::ActivityType::CONCURRENT_KERNEL,
      libkineto::ActivityType::GPU_MEMCPY,
      libkineto::ActivityType::GPU_MEMSET,
      libkineto::ActivityType::PRIVATEUSE1_RUNTIME,
      libkineto::ActivityType::PRIVATEUSE1_DRIVER};
};

REGISTER_PRIVATEUSE1_PROFILER(EmuActivityProfiler);

std::string device_traces_unavailable() {
  return "";
}

} // namespace
#else
namespace {
std::string device_traces_unavailable() {
#if !EMU_DRIVER_HAS_TRACING
  return "needs driver API 2.4 (activity tracing); this torch_emu was built against driver API " +
      std::to_string(EMU_DRIVER_VERSION_MAJOR) + "." + std::to_string(EMU_DRIVER_VERSION_MINOR);
#else
  return "needs torch 2.13 or later (its PrivateUse1 profiler registry for Kineto); this torch_emu was built "
         "against an older torch";
#endif
}
} // namespace
#endif

} // namespace torch_emu

TORCH_LIBRARY_FRAGMENT(torch_emu, m) {
  // "" when torch.profiler shows emu kernels (ProfilerActivity.PrivateUse1), else why not.
  m.def("device_traces_unavailable() -> str", [] { return torch_emu::device_traces_unavailable(); });
}
