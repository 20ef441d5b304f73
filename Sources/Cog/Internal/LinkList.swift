/// A growable list of trivial values behind a raw pointer, owned by one node.
///
/// Edge lists are read on every settle and push; a `ContiguousArray` stored in
/// a class property is retained and released around each element read, this
/// list is not. It holds only trivial elements (`SourceLink`, `ObserverLink`),
/// so freeing it never runs element destructors.
///
/// - Important: the owner must call `deallocate()` exactly once (in `deinit`).
struct LinkList<Element: BitwiseCopyable> {
    private(set) var base: UnsafeMutablePointer<Element>?
    private(set) var count = 0
    private var capacity = 0

    @inline(__always)
    subscript(index: Int) -> Element {
        get { base.unsafelyUnwrapped[index] }
        set { base.unsafelyUnwrapped[index] = newValue }
    }

    var isEmpty: Bool { count == 0 }

    @inline(__always)
    mutating func append(_ element: Element) {
        if count == capacity { grow() }
        base.unsafelyUnwrapped[count] = element
        count += 1
    }

    @inline(__always)
    mutating func removeLast(_ n: Int = 1) {
        count -= n
    }

    mutating func removeAll() {
        count = 0
    }

    private mutating func grow() {
        let newCapacity = max(4, capacity * 2)
        let newBase = UnsafeMutablePointer<Element>.allocate(capacity: newCapacity)
        if let base {
            newBase.initialize(from: base, count: count)
            base.deallocate()
        }
        base = newBase
        capacity = newCapacity
    }

    mutating func deallocate() {
        base?.deallocate()
        base = nil
        count = 0
        capacity = 0
    }
}
