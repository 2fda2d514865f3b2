import Testing
import ThingAgent

/// The package's one seeded generator (the simulator's, used by the tests too): its sequence is part of what
/// `simulate --seed N` promises (the same fleet and values on every run), so it is pinned here.
@Suite("Seeded generator")
struct SeededGeneratorTests {
    /// SplitMix64's published output for seed 0.
    @Test func theSequenceIsSplitMix64s() {
        var generator = SeededGenerator(seed: 0)
        #expect((0..<3).map { _ in generator.next() }
                == [0xE220_A839_7B1D_CDAF, 0x6E78_9E6A_A1B9_65F4, 0x06C4_5D18_8009_454F])
    }

    /// A device's stream: what the simulator's fleet plan and values draw from.
    @Test func aStreamFollowsFromTheSeedAndItsIndex() {
        var stream = SeededGenerator(seed: 1, stream: 2)
        #expect((0..<3).map { _ in stream.next() }
                == [0x8D10_F305_32EE_B7D4, 0x4D42_C38D_9899_15F9, 0x7EF7_B1FE_77C1_7E4E])
        var first = SeededGenerator(seed: 1, stream: 0)
        #expect((0..<2).map { _ in first.next() } == [0x5E41_AB08_7439_611E, 0xF18D_6CE9_3D6C_F1EE])
    }

    @Test func chanceKeepsToItsBounds() {
        var generator = SeededGenerator(seed: 7)
        #expect((0..<1000).allSatisfy { _ in !generator.chance(0) })
        #expect((0..<1000).allSatisfy { _ in generator.chance(1) })
        let hits = (0..<10_000).filter { _ in generator.chance(0.25) }.count
        #expect((2_000...3_000).contains(hits))
    }
}
