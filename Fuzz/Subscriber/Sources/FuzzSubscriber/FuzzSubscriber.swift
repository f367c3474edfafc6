// libFuzzer entry point for the subscriber's protocol handling (built by Fuzz/Subscriber/run.sh, not by the main
// package). Any trap (a failed invariant, an arithmetic overflow) or sanitizer report is a bug.
@_spi(Testing) import FrameBus

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSubscriber(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    SubscriberProtocolFuzzing.run(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}
