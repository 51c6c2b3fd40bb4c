import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import GRDB

extension Store.Configuration {
    /// This configuration with ``crashInjector`` set: the store stops with
    /// ``ChronicleError/Code/simulatedCrash`` at the crash points `injector`
    /// picks. For simulations and tests only.
    package func crashing(with injector: CrashInjector) -> Self {
        var copy = self
        copy.crashInjector = injector
        return copy
    }
}
