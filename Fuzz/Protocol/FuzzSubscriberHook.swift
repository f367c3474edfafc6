// The hook for the subscriber's state machine (selector byte 2 of an input, see FuzzProtocol.swift).
//
// The subscriber's state machine needs the pixel-buffer and codec layers, which this swiftc build does not compile;
// it is fuzzed by the sibling target Fuzz/Subscriber (SwiftPM, `--sanitize=fuzzer,address`), which run.sh runs after
// this one. Here inputs with selector 2 exercise only the decoder, as selector 0 does.
func fuzzSubscriberStateMachine(_ input: ArraySlice<UInt8>) {
    _ = try? WireMessage.decode(Array(input), descriptorCount: 0)
}
