// IntelliJ Platform plugin for qwen-companion (IntelliJ Platform Gradle Plugin 2.x).
// Build: ./gradlew buildPlugin  ->  build/distributions/qwen-companion-intellij-<version>.zip
// The plugin uses the binding's distribution jar, qwen-companion-kotlin-<version>.jar, which carries
// every platform's library and qc-mcp-bridge (bindings/kotlin/build-dist.sh, run by scripts/dist.sh),
// so one zip serves Linux, macOS and Windows.
// See README.md (this file cannot be exercised in the repository's CI: no Gradle/IntelliJ SDK download there;
// the CI builds the same zip with bindings/kotlin/build-dist.sh instead).

import java.io.File

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

// The binding's distribution jar: $QC_DIST_DIR/kotlin (default ../../target/dist/kotlin, what
// `bash scripts/dist.sh` writes). It holds the binding's classes and, under JNA's resource prefixes
// (linux-x86-64/, linux-aarch64/, darwin-aarch64/, darwin-x86-64/, win32-x86-64/), each platform's
// library and bridge; the binding copies the running platform's pair out of it.
// (Plain values, resolved when the build is configured: nothing here captures the script object,
// which the configuration cache could not store.)
val distDir: String = providers.environmentVariable("QC_DIST_DIR")
    .orElse(layout.projectDirectory.dir("../../target/dist").asFile.path).get()
val pluginVersion: String = version.toString()
val bindingJar: File = file("$distDir/kotlin/qwen-companion-kotlin-$pluginVersion.jar") // relative: to examples/intellij

dependencies {
    // Bundled in the plugin's lib/ next to the plugin's own jar.
    implementation(files(bindingJar))
    intellijPlatform {
        // IntelliJ IDEA Community 2024.3 (build 243) as the compile target; the plugin
        // declares since-build 243 and no until-build. (Plugin 2.9+ prefers
        // intellijIdea(...) for the unified 2025.3+ distribution.)
        intellijIdeaCommunity("2024.3.5")
        // LocalTerminalCustomizer (optional dependency, see plugin.xml / qwen-terminal.xml).
        bundledPlugin("org.jetbrains.plugins.terminal")
    }
    // JNA and the Kotlin stdlib come with the IDE (every plugin gets them): nothing else to bundle.
}

kotlin {
    // Java 21 (what IntelliJ 2024.3 runs on) for the plugin; the binding jar is Java 11 bytecode.
    jvmToolchain(21)
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

// A clear message instead of unresolved references when the binding's jar has not been built.
val checkBindingJar by tasks.registering {
    val jar = bindingJar
    val v = pluginVersion
    doLast {
        val f = jar
        if (!f.isFile) {
            throw GradleException(
                "$f is missing: run `bash scripts/dist.sh` from the repository root (every platform), or " +
                    "`bindings/kotlin/build-dist.sh --native <folder of target folders> --version $v --out target/dist/kotlin` " +
                    "(only the platforms you have built), or point QC_DIST_DIR at a dist folder"
            )
        }
    }
}

tasks {
    named("compileKotlin") { dependsOn(checkBindingJar) }
}
