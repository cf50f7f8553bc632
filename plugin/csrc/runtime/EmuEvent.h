// Events of the emu device: driver events on API 2.x, plain markers on 1.x (where all work
// is complete when its call returns). Shared by the device guard and torch.emu.Event.
#pragma once

#include <c10/core/Stream.h>

namespace torch_emu {

// Creates the event on first use (timing on or off), then records it on the stream.
void event_record(void** event, const c10::Stream& stream, bool timing);
// Future work on stream waits for the event's recorded work.
void event_block(void* event, const c10::Stream& stream);
bool event_query(void* event);
void event_synchronize(void* event);
// Milliseconds between two completed events created with timing on (driver API 2.x).
double event_elapsed_ms(void* start, void* end);
void event_destroy(void* event) noexcept;

} // namespace torch_emu
