// The hook for the subscriber's state machine (selector byte 2 of an input, see FuzzProtocol.swift).
//
// The subscriber's engineer replaces this body with a driver for SubscriberStateMachine (datagrams from a hostile
// publisher, consumer releases, time), and adds the state machine's sources to SUBSCRIBER_SOURCES in run.sh. Until
// then inputs with selector 2 exercise only the decoder, as selector 0 does.
func fuzzSubscriberStateMachine(_ input: ArraySlice<UInt8>) {
    _ = try? WireMessage.decode(Array(input), descriptorCount: 0)
}
