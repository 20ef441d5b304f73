#ifndef COGD_CRASH_MARK_H
#define COGD_CRASH_MARK_H
#include <stdint.h>

/// Installs handlers for the fatal signals a crash raises (SIGSEGV, SIGILL,
/// SIGTRAP, SIGABRT, SIGBUS, SIGFPE). A handler, when the signal came from
/// the process itself (a fault the kernel raised, or abort()/raise()),
/// writes the signal's number as one byte at `offset` of the open
/// descriptor `fd` (pwrite(2): async-signal-safe), runs the handler that
/// was installed before (the Swift runtime's backtracer prints where it
/// crashed), then dies of the signal under its default action. A signal
/// sent from outside (kill(1)) marks nothing. Until `cogd_crash_mark_disarm`, `fd` must stay open. 0 on
/// success, else an errno value.
int cogd_crash_mark_arm(int fd, int64_t offset);

/// Stops marking `fd` (before it is closed); the handlers stay installed
/// and only die of the signal. Does nothing when another descriptor is
/// armed.
void cogd_crash_mark_disarm(int fd);

#endif
