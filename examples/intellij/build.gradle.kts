// IntelliJ Platform plugin for qwen-companion (IntelliJ Platform Gradle Plugin 2.x).
// Build: ./gradlew buildPlugin  ->  build/distributions/qwen-companion-intellij-<version>.zip
// See README.md (this file cannot be exercised in the repository's CI: no Gradle/IntelliJ SDK download there).

import org.gradle.api.provider.Provider

plugins {
    id("java")
    id("org.jetbrains.kotlin.jvm") version "2.1.20"
    id("org.jetbrains.intellij.platform") version "2.5.0"
}

group = "qwen.companion"
version = "0.1.0"

repositories {
    mavenCentral()
    intellijPlatform {
        defaultRepositories()
    }
}

dependencies {
    intellijPlatform {
        // IntelliJ IDEA Community 2024.3 (build 243) as the compile target; the plugin
        // declares since-build 243 and no until-build. (Plugin 2.9+ prefers
        // intellijIdea(...) for the unified 2025.3+ distribution.)
        intellijIdeaCommunity("2024.3.5")
        // LocalTerminalCustomizer (optional dependency, see plugin.xml / qwen-terminal.xml).
        bundledPlugin("org.jetbrains.plugins.terminal")
    }
    // JNA and the Kotlin stdlib come with the IDE: nothing else to bundle.
}

kotlin {
    // Java 21 (what IntelliJ 2024.3 runs on) for the plugin and the binding it
    // compiles in; the binding needs at least Java 9 (java.lang.ref.Cleaner).
    jvmToolchain(21)
    // The Kotlin binding is compiled into the plugin from its sources.
    sourceSets.named("main") {
        kotlin.srcDir("../../bindings/kotlin/src")
    }
}

intellijPlatform {
    pluginConfiguration {
        ideaVersion {
            sinceBuild = "243"
            untilBuild = provider { null }
        }
    }
    buildSearchableOptions = false
}

// The native library copied into the plugin as <plugin>/native/<System.mapLibraryName("qwen_companion")>
// (libqwen_companion.so, libqwen_companion.dylib, qwen_companion.dll), built for the OS Gradle runs on:
// $QWEN_COMPANION_LIB if set, else the workspace's release build (cargo build --release).
val nativeLibrary: Provider<String> = providers.environmentVariable("QWEN_COMPANION_LIB")
    .orElse(layout.projectDirectory.file("../../target/release/" + System.mapLibraryName("qwen_companion")).asFile.path)

// The plugin tools' stdio bridge, next to the library as <plugin>/native/qc-mcp-bridge (qc-mcp-bridge.exe
// on Windows, the name QcPlatform.bridgeFileName() gives): the plugin copies it to ~/.qwen/companion/bin/
// (a path that survives plugin updates) and registers that copy.
val bridgeFileName = if (System.getProperty("os.name").startsWith("Windows")) "qc-mcp-bridge.exe" else "qc-mcp-bridge"
val mcpBridge: Provider<String> = providers.environmentVariable("QWEN_COMPANION_BRIDGE")
    .orElse(layout.projectDirectory.file("../../target/release/$bridgeFileName").asFile.path)

tasks {
    prepareSandbox {
        from(nativeLibrary) {
            into(pluginName.map { "$it/native" })
        }
        from(mcpBridge) {
            into(pluginName.map { "$it/native" })
        }
    }
}
