#ifndef COGD_CRASH_MARK_H
#define COGD_CRASH_MARK_H
#include <stddef.h>
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

/// A courier for the crash: after marking, the handler writes the signal's
/// number as one byte to `wake_fd` and waits (poll(2)) up to `wait_ms` for
/// a byte on `done_fd` before it goes on to die, so a thread of the
/// process's own (blocked reading `wake_fd`) can tell others of the crash
/// first. `wake_fd` -1: no courier (the default). Both descriptors must
/// stay open until the courier is set again with -1.
void cogd_crash_mark_courier(int wake_fd, int done_fd, int wait_ms);

/// Removes the courier set with `wake_fd`; does nothing when another is set.
void cogd_crash_mark_courier_release(int wake_fd);

/// Gives the calling thread an alternate signal stack of `size` bytes
/// (sigaltstack(2), mapped with a guard page below it), where the handlers
/// run: a thread that overflowed its own stack then still marks its crash.
/// Returns the mapping, for `cogd_crash_mark_alternate_stack_release`; NULL
/// when the thread has one already or none could be made (the handlers
/// then run on the thread's stack, as before).
void *cogd_crash_mark_alternate_stack(size_t size);

/// Removes the calling thread's alternate signal stack made by
/// `cogd_crash_mark_alternate_stack` and unmaps it; does nothing for NULL,
/// another stack, or while a handler runs on it.
void cogd_crash_mark_alternate_stack_release(void *memory, size_t size);

#endif
