/// One entry of the state table.
public struct StateEntry: Equatable, Sendable {
    public let name: String
    public let key: [UInt8]?
    public let value: [UInt8]

    public init(name: String, key: [UInt8]?, value: [UInt8]) {
        self.name = name
        self.key = key
        self.value = value
    }
}
