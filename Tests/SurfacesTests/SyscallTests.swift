import CFrameBusShims
import Glibc
import SystemPackage
import Testing

@testable import Surfaces

@Suite(.timeLimit(.minutes(5))) struct SyscallTests {
    @Test func closeReleasesTheDescriptor() throws {
        let descriptor = try Syscall.memfdCreate(name: "close-test", flags: MemFD.createFlags).get()
        Syscall.close(descriptor)
        #expect(cfb_get_descriptor_flags(descriptor.rawValue) == -1)
        #expect(errno == EBADF)
    }

    /// One close policy for the package: closing a descriptor we do not own is a bug, and traps (as in swift-nio).
    @Test func closingADescriptorWeDoNotOwnTraps() async {
        await #expect(processExitsWith: .failure) {
            Syscall.close(Int32(-1))
        }
    }

    @Test func valueOrErrnoReportsTheErrnoOfTheCall() {
        let result = Syscall.valueOrErrno { Glibc.dup(-1) }
        #expect(result == .failure(.badFileDescriptor))
    }
}
