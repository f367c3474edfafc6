// libFuzzer entry point: the input is what a hostile peer wrote into its ring files (FrameBus's
// `RingFuzzing.run`, which traps on a broken invariant).
@_spi(Testing) import FrameBus

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRings(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    _ = RingFuzzing.run(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}
