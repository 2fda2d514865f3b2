import Foundation

/// The repository's root directory (this file is Tests/TestSupport/Repository.swift).
public func repositoryRoot() -> String {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
}

/// Config/models: the thing models that ship (the simulator's built-in models equal them, SimulatorPlanTests).
public func shippedModelsDirectory() -> String {
    repositoryRoot() + "/Config/models"
}

/// Config/models/<product>.json, the shipped thing model of `product` (`p-light-1`, `p-plug-1`, ...).
public func shippedModelPath(_ product: String) -> String {
    shippedModelsDirectory() + "/\(product).json"
}

/// The text of the shipped thing model of `product`, as the agent reads it.
public func shippedModel(_ product: String) throws -> String {
    let path = shippedModelPath(product)
    guard let data = FileManager.default.contents(atPath: path) else {
        throw TestSupportError("no shipped thing model at \(path)")
    }
    return String(decoding: data, as: UTF8.self)
}
