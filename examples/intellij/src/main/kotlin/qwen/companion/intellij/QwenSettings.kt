package qwen.companion.intellij

import com.intellij.openapi.components.PersistentStateComponent
import com.intellij.openapi.components.Service
import com.intellij.openapi.components.State
import com.intellij.openapi.components.Storage
import com.intellij.openapi.components.service
import qwen.companion.CompanionCli
import qwen.companion.intellij.core.CompanionOptions

/**
 * The plugin's settings (IDE-wide, stored in `qwen-companion.xml` of the IDE's
 * options folder), edited in Settings | Tools | Qwen Code Companion
 * ([QwenSettingsConfigurable]). The rules live in [CompanionOptions].
 */
@Service(Service.Level.APP)
@State(name = "QwenCompanionSettings", storages = [Storage("qwen-companion.xml")])
class QwenSettings : PersistentStateComponent<QwenSettings.Stored> {
    /** The persisted form (XML bean: public mutable fields, blank/-1 = unset). */
    class Stored {
        @JvmField var enabled: Boolean = true
        @JvmField var runCommand: String = CompanionOptions.DEFAULT_RUN_COMMAND
        @JvmField var debounceMs: Long = -1
        @JvmField var maxWaitMs: Long = -1
        @JvmField var requestTimeoutMs: Long = CompanionOptions.DEFAULT_REQUEST_TIMEOUT_MS
        @JvmField var pluginHostEnabled: Boolean = true
        @JvmField var pluginsDir: String = ""
        @JvmField var registerMcp: Boolean = true
        @JvmField var alwaysLoadTools: Boolean = false
        @JvmField var participantName: String = ""
        /** `qwen`, `gemini` or `both`. */
        @JvmField var cli: String = CompanionCli.QWEN.id
        @JvmField var geminiCommand: String = CompanionOptions.DEFAULT_GEMINI_COMMAND
    }

    @Volatile private var stored = Stored()

    override fun getState(): Stored = stored

    override fun loadState(state: Stored) {
        stored = state
    }

    /** The current options; a stored value that is no longer valid falls back to its default. */
    val options: CompanionOptions
        get() {
            val s = stored
            val o = CompanionOptions(
                enabled = s.enabled,
                runCommand = s.runCommand,
                debounceMs = s.debounceMs.takeIf { it >= 0 },
                maxWaitMs = s.maxWaitMs.takeIf { it >= 0 },
                requestTimeoutMs = s.requestTimeoutMs,
                pluginHostEnabled = s.pluginHostEnabled,
                pluginsDir = s.pluginsDir.takeIf { it.isNotBlank() },
                registerMcp = s.registerMcp,
                alwaysLoadTools = s.alwaysLoadTools,
                participantName = s.participantName.takeIf { it.isNotBlank() },
                cli = CompanionCli.fromId(s.cli) ?: CompanionCli.QWEN,
                geminiCommand = s.geminiCommand
            )
            return if (o.problems().isEmpty()) o else CompanionOptions(enabled = o.enabled, cli = o.cli)
        }

    /** Stores [o] (already checked with [CompanionOptions.problems]). */
    fun update(o: CompanionOptions) {
        val s = Stored()
        s.enabled = o.enabled
        s.runCommand = o.runCommand
        s.debounceMs = o.debounceMs ?: -1
        s.maxWaitMs = o.maxWaitMs ?: -1
        s.requestTimeoutMs = o.requestTimeoutMs
        s.pluginHostEnabled = o.pluginHostEnabled
        s.pluginsDir = o.pluginsDir ?: ""
        s.registerMcp = o.registerMcp
        s.alwaysLoadTools = o.alwaysLoadTools
        s.participantName = o.participantName ?: ""
        s.cli = o.cli.id
        s.geminiCommand = o.geminiCommand
        stored = s
    }

    companion object {
        fun getInstance(): QwenSettings = service<QwenSettings>()
    }
}
