/// Which CPUs the leader's serving thread — the one that runs turns and
/// commits them — may run on.
///
/// A durable commit sleeps twice on the disk (`fdatasync`, then the meta
/// page's synchronous write). When the disk's completion interrupt arrives on
/// another CPU than the sleeping thread's, waking it costs a cross-CPU
/// interrupt; on this kind of virtual machine that was measured at about
/// 50 µs per wake (a raw LMDB commit: 215 µs on the interrupt's CPU, 315 µs
/// on the other). A thread that only commits ends up on the interrupt's CPU
/// by itself; the leader's thread is woken by the network as often, so the
/// scheduler keeps moving it away.
public enum CommitAffinity: Sendable, Equatable {
    /// Left to the scheduler.
    case unpinned
    /// The CPUs the data folder's disk delivers its completion interrupts
    /// to, when they are some of the CPUs this process may use (not all).
    case automatic
    /// These CPUs (numbered as Linux numbers them).
    case cpus([Int])
}
