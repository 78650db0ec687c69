// The fault builds' device side when they are built without CUDA (see fault_device.h): nothing
// can be done on a device, and every function says so.
#include "fault_device.h"

bool qgate_fault_device_illegal_write(void*) { return false; }
bool qgate_fault_device_fill_nan(float*, int64_t, void*) { return false; }
bool qgate_fault_device_leak(size_t) { return false; }
