// Timing and sample buffers (CMTime, CMSampleBuffer).
import PixelBuffers
