// Turns emu driver error codes into c10::Error with the driver's own message.
#pragma once

#include <c10/util/Exception.h>
#include <emu_driver.h>

#define EMU_CHECK(EXPR)                          \
  do {                                           \
    const emuError_t __emu_err = (EXPR);         \
    TORCH_CHECK(                                 \
        __emu_err == emuSuccess,                 \
        "emu driver error ",                     \
        emuGetErrorName(__emu_err),              \
        ": ",                                    \
        emuGetErrorString(__emu_err),            \
        (*emuGetLastErrorMessage() ? " (" : ""), \
        emuGetLastErrorMessage(),                \
        (*emuGetLastErrorMessage() ? ")" : ""),  \
        " in " #EXPR);                           \
  } while (0)
