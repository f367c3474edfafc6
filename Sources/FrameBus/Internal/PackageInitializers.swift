// Package-level factories for values whose synthesized memberwise initializers are internal (and cannot be
// redeclared in an extension): FrameBusTesting's fuzz bodies, a sibling module, build the publisher's state
// machine's inputs with them.

extension PublisherStateMachine.Credentials {
    package static func peer(processID: Int32, userID: UInt32) -> Self { Self(processID: processID, userID: userID) }
}

extension PublisherStateMachine.Limits {
    package static func accepting(formats: [UInt32], allowedUserIDs: Set<UInt32>) -> Self {
        Self(formats: formats, allowedUserIDs: allowedUserIDs)
    }
}

extension PublisherStateMachine.Representation {
    package static func frame(
        surfaceID: UInt64,
        surface: WireSurface,
        surfaceV1: WireSurfaceV1?,
        bytesUsed: UInt64,
        resource: Resource
    ) -> Self {
        Self(surfaceID: surfaceID, surface: surface, surfaceV1: surfaceV1, bytesUsed: bytesUsed, resource: resource)
    }
}
