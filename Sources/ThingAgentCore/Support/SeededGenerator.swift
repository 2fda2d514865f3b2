/// SplitMix64: a small, fast generator whose whole sequence follows from its seed, so that `--seed N` gives the
/// same fleet, names and values on every run. Each device gets a stream of its own, so the values one device draws
/// do not depend on how the others were scheduled.
///
/// Package access: the simulator's and the tests' one generator (the tests repeat their random inputs with it), not
/// part of the library's API.
package struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    package init(seed: UInt64) {
        state = seed
    }

    /// An independent stream for the `index`-th user of `seed`.
    package init(seed: UInt64, stream index: Int) {
        var mixer = SeededGenerator(seed: seed ^ (UInt64(truncatingIfNeeded: index) &* 0xD6E8_FEB8_6659_FD93))
        state = mixer.next()
    }

    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// True with probability `p`.
    package mutating func chance(_ p: Double) -> Bool {
        Double.random(in: 0..<1, using: &self) < p
    }
}
