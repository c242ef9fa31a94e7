// CFuzzDriver - libFuzzer's entry point for programs that keep their own main.
// SwiftPM links every executable's main as `<Module>_main`, so a fuzz target cannot rely on
// libFuzzer's main(); it calls LLVMFuzzerRunDriver (in the toolchain's libclang_rt.fuzzer,
// linked by `-sanitize=fuzzer`) from its top-level code instead.
#ifndef C_FUZZ_DRIVER_H
#define C_FUZZ_DRIVER_H
#include <stddef.h>
#include <stdint.h>

int fuzz_run_driver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
