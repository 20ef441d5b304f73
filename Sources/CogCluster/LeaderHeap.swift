internal import CThreadAffinity

/// How the leader process's heap treats a batch's buffers.
public enum LeaderHeap {
    /// A batch's buffers (its records, the turns frame, the reply effects:
    /// up to a few MiB) come from the heap and go back to it, not to the
    /// kernel. By default glibc maps each allocation over 128 KiB afresh and
    /// returns free memory at the heap's top, so every batch took page
    /// faults to zero new pages (about 3% of the serving thread's samples
    /// under 16 pipelining clients). The leader keeps up to 64 MiB free at
    /// the heap's top instead, and maps only allocations of 32 MiB or more
    /// (its batches are bounded: `Leader.maximumBatchBytes`). Called once,
    /// at the start of `cogd leader`.
    public static func keepBatchBuffers() {
        cogd_keep_heap(32 << 20, 64 << 20)
    }
}
