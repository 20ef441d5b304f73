import CogCodec
import CogProtocol
import Testing

@testable import CogCluster

/// What a worker keeps and counts of the rejections of its own requests
/// (`WorkerRejections`): named by the request it sent, bounded everywhere.
@Suite("rejections a worker sees")
struct WorkerRejectionsTests {
    static func request(_ sequence: UInt64) -> RequestID { RequestID(worker: "w1", sequence: sequence) }

    @Test func `a rejection is named by the op and scope instance that sent it and counted by op and code; other outcomes are not`() {
        var rejections = WorkerRejections()
        rejections.sent(Self.request(1), op: "counter.bump", turnName: "Counter.bonus.counter.bump", instance: 1 << 32 | 3)
        rejections.sent(Self.request(2), op: "counter.bump", turnName: "counter.bump", instance: nil)
        #expect(rejections.answered(OpReply(request: Self.request(2), outcome: .applied(revision: 4))) == nil)
        let rejection = rejections.answered(
            OpReply(request: Self.request(1), outcome: .rejected(code: "retired-scope", detail: "instance 4294967299 is retired")))
        #expect(
            rejection
                == WorkerRejections.Rejection(
                    request: Self.request(1), op: "counter.bump", turnName: "Counter.bonus.counter.bump", instance: 1 << 32 | 3,
                    code: "retired-scope", detail: "instance 4294967299 is retired", earlier: false))
        #expect(rejections.counts == [WorkerRejections.Series(op: "counter.bump", code: "retired-scope"): 1])
        let taken = rejections.take()
        #expect(taken.rejections.map(\.request) == [Self.request(1)] && taken.dropped == 0)
        #expect(rejections.take().rejections.isEmpty, "taken once")
        #expect(rejections.counts.values.reduce(0, +) == 1, "counts stay")
    }

    @Test func `the label pairs, the kept reports and the remembered requests are bounded`() {
        var rejections = WorkerRejections()
        for index in 0..<(WorkerRejections.seriesLimit + 10) {
            rejections.sent(Self.request(UInt64(index + 1)), op: "op\(index)", turnName: nil, instance: nil)
            rejections.answered(OpReply(request: Self.request(UInt64(index + 1)), outcome: .rejected(code: "bad-argument", detail: "")))
        }
        // A code that is not a short name (a peer's) is counted as _other, never as a label of its own.
        rejections.answered(OpReply(request: Self.request(999), outcome: .rejected(code: "bad\n\"code", detail: "")))
        #expect(rejections.counts.count == WorkerRejections.seriesLimit + 1)
        #expect(rejections.counts[WorkerRejections.Series(op: "_other", code: "_other")] == 11)
        for sequence in 1_000..<1_400 {
            rejections.answered(OpReply(request: Self.request(UInt64(sequence)), outcome: .rejected(code: "unavailable", detail: "")))
        }
        let taken = rejections.take()
        #expect(taken.rejections.count == WorkerRejections.reportsKept)
        #expect(taken.dropped == UInt64(WorkerRejections.seriesLimit + 11 + 400 - WorkerRejections.reportsKept))
        // Requests never answered are forgotten, oldest first, past the limit.
        for sequence in 10_000..<(10_000 + WorkerRejections.requestsRemembered + 1) {
            rejections.sent(Self.request(UInt64(sequence)), op: "counter.bump", turnName: nil, instance: nil)
        }
        let forgotten = rejections.answered(OpReply(request: Self.request(10_000), outcome: .rejected(code: "unavailable", detail: "")))
        #expect(forgotten?.op == "")
        let remembered = rejections.answered(
            OpReply(request: Self.request(UInt64(10_000 + WorkerRejections.requestsRemembered)), outcome: .rejected(code: "unavailable", detail: "")))
        #expect(remembered?.op == "counter.bump")
    }

    @Test func `a refusal by the op's body is kept for the log, marked refused, and counted by outcome only`() {
        var rejections = WorkerRejections()
        rejections.sent(Self.request(5), op: "ledger.transfer", turnName: "Teller.alice.ledger.transfer", instance: 1 << 32 | 9)
        let refusal = rejections.answered(
            OpReply(request: Self.request(5), outcome: .refused(code: "insufficient-funds", reason: "alice has 30, the transfer needs 50")))
        #expect(
            refusal
                == WorkerRejections.Rejection(
                    request: Self.request(5), op: "ledger.transfer", turnName: "Teller.alice.ledger.transfer", instance: 1 << 32 | 9,
                    code: "insufficient-funds", detail: "alice has 30, the transfer needs 50", earlier: false, refused: true))
        #expect(rejections.counts.isEmpty, "the app's codes are not rejection codes")
        #expect(rejections.take().rejections == [refusal!])
    }
}

