// One import for users: `import FrameBus` brings every layer.
@_exported import PixelBuffers
@_exported import SampleBuffers
@_exported import SurfaceCompression
@_exported import Surfaces
