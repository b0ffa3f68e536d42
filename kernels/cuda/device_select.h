// Which GPU a host thread's CUDA calls go to. The current device is per host
// thread, and the engine loads on one thread and steps on another, so a
// runner of cuda:N selects N at the top of every entry point.
#pragma once

#include "common/status.h"

namespace loragate::cuda {

// Makes device `index` current for the calling thread; an index the machine
// lacks is refused with CUDA's own words.
Status set_device(int index);

}  // namespace loragate::cuda
