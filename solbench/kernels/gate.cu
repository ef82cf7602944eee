// The cold timer's gate (solbench.device.timer): one thread holds its stream until the host writes
// a non-zero word into `flag` (pinned host memory, read by the GPU through unified addressing), or
// until `timeout_cycles` SM cycles have passed. The host enqueues the flush and the timed call
// behind it, then releases it: the call runs with all of its launches already queued, and the GPU
// waits on the host for exactly as long as the host takes, where a spin had to be sized ahead for
// the slowest host (nvbench's blocking kernel, with a timeout so that a host that never releases
// cannot hold the GPU for ever).
//
// solbench: min_cc 7.0

extern "C" __global__ void hold_until_released(const volatile int* flag, long long timeout_cycles) {
  const long long start = clock64();
  while (*flag == 0) {
    if (clock64() - start > timeout_cycles) return;
  }
}
