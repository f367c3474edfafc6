# Sourced by Fuzz/run.sh and Fuzz/race.sh: stages the decoder's Swift sources (Sources/SurfaceCompression without
# the pixel-buffer layer) into "$WORK/src". The decoder core depends on PixelBuffers only through the error's
# `underlying` field: the import is stripped and a stand-in type given. Needs ROOT and WORK.
mkdir -p "$WORK/src"
for file in "$ROOT"/Sources/SurfaceCompression/Internal/*.swift "$ROOT/Sources/SurfaceCompression/CompressionError.swift"; do
    case "$(basename "$file")" in PixelBufferAccess.swift) continue ;; esac
    sed '/^import PixelBuffers$/d; /^import Surfaces$/d' "$file" > "$WORK/src/$(basename "$file")"
done
cat > "$WORK/src/Stand-in.swift" <<'SWIFT'
public struct PixelBufferError: Error, Hashable, Sendable, CustomStringConvertible {
    public var description: String { "stand-in" }
}
SWIFT
