import CogProtocol

extension ZMQSocket {
    /// Sends `goodbye` for `name`, which this connection said hello as, and
    /// lets closing wait up to half a second to send it (`cogwire.md` §3):
    /// the leader drops the name at once instead of at the heartbeat timeout.
    public func sayGoodbye(as name: String) {
        try? setLinger(.milliseconds(500))
        _ = try? send([WireMessage.goodbye(worker: name).encoded()], wait: false)
    }
}
