import CogCodec

/// The `ship` and `ship-ack` frames, written and read directly: one of each
/// goes between the leader and every synchronous standby per commit, and a
/// reply waits for the pair (ha.md §9). Byte-equal to the general encoding
/// (the `ship` and `ship-ack` vectors check it); any other layout is read
/// by the general decoder.
extension WireMessage {
    /// A `ship` frame around a shipped commit's bytes.
    static func shipFrame(epoch: UInt64, sequence: UInt64, commit: [UInt8]) -> [UInt8] {
        frame(type: "ship", capacity: 64 + commit.count) { writer in
            writer.appendHead(major: 5, 3)  // epoch, commit, sequence
            writer.appendText("epoch")
            writer.appendHead(major: 0, epoch)
            writer.appendText("commit")
            writer.appendHead(major: 2, UInt64(commit.count))
            writer.appendRaw(commit)
            writer.appendText("sequence")
            writer.appendHead(major: 0, sequence)
        }
    }

    /// A `ship-ack` frame.
    static func shipAckFrame(node: String, sequence: UInt64) -> [UInt8] {
        frame(type: "ship-ack", capacity: 48 + node.utf8.count) { writer in
            writer.appendHead(major: 5, 2)  // node, sequence
            writer.appendText("node")
            writer.appendText(node)
            writer.appendText("sequence")
            writer.appendHead(major: 0, sequence)
        }
    }

    /// Reads a `ship` or `ship-ack` frame laid out as written above; nil for
    /// anything else. A `ship-ack` whose node is not a node's name is refused
    /// as the general decoder refuses it.
    static func scanShipping(_ frame: [UInt8]) throws(WireDecodeError) -> WireMessage? {
        guard var scanner = scannedToBody(frame) else { return nil }
        switch scanner.mapCount() {
        case 3:
            guard scanner.skip(text: "epoch"), let epoch = scanner.unsigned(), scanner.skip(text: "commit"), let commit = scanner.byteString(),
                scanner.skip(text: "sequence"), let sequence = scanner.unsigned(), scanner.skip(text: "type"), scanner.skip(text: "ship"),
                scanner.isAtEnd
            else { return nil }
            return .ship(epoch: epoch, sequence: sequence, commit: commit)
        case 2:
            guard scanner.skip(text: "node"), let node = scanner.text(), scanner.skip(text: "sequence"), let sequence = scanner.unsigned(),
                scanner.skip(text: "type"), scanner.skip(text: "ship-ack"), scanner.isAtEnd
            else { return nil }
            try checkNode(node, in: "ship-ack")
            return .shipAck(node: node, sequence: sequence)
        default:
            return nil
        }
    }
}
