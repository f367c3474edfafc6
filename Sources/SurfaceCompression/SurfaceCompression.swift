// Lossless compressed surfaces (&8v0, &8f0, &xv0, &xf0, &BGA): see Codec.swift.
import PixelBuffers
