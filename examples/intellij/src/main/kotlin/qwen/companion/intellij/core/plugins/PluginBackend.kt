package qwen.companion.intellij.core.plugins

import qwen.companion.QcStatus
import qwen.companion.QwenCompanionException
import qwen.companion.QwenPluginHost

/**
 * What the plugin UI needs from the plugin host: the subset of
 * [QwenPluginHost] it calls, so the UI logic is tested with a fake and runs
 * against the real host through [HostBackend]. Every method may block (a
 * plugin may have to start): call them off the UI thread.
 */
interface PluginBackend {
    /** `QwenPluginHost.list()`: each entry with `id`, `name`, `version`, `enabled`, `manifest`, `lastError`. */
    fun list(): List<Map<String, Any?>>
    fun install(src: String): Map<String, Any?>
    fun uninstall(id: String, removeData: Boolean): Map<String, Any?>
    fun enable(id: String)
    fun disable(id: String)
    fun call(pluginId: String, tool: String, params: Map<String, Any?>, cwd: String?): Map<String, Any?>
    fun visible(pluginId: String, cwd: String): Boolean
    /** `Auto` first, then what the `optionsTool` returned. */
    fun options(pluginId: String, configId: String): List<Map<String, Any?>>
    fun setConfigValue(id: String, key: String, value: Any?)
    fun parseDocument(mime: String, data: ByteArray): Map<String, Any?>
    /** The URL of view [viewId] of [pluginId] (null: its `ui` panel). */
    fun viewUrl(pluginId: String, viewId: String?): String
    /** The directory holding the plugins (`installed/`, `state.json`). */
    val pluginsDir: String
}

/**
 * [PluginBackend] on the library's [QwenPluginHost]. The view URLs come from
 * the host's view server, started on first use (and again if it was stopped).
 */
class HostBackend(val host: QwenPluginHost) : PluginBackend {
    private val viewsLock = Any()
    @Volatile private var viewsStarted = false

    override fun list(): List<Map<String, Any?>> = host.list()
    override fun install(src: String): Map<String, Any?> = host.install(src)
    override fun uninstall(id: String, removeData: Boolean): Map<String, Any?> = host.uninstall(id, removeData)
    override fun enable(id: String) = host.enable(id)
    override fun disable(id: String) = host.disable(id)
    override fun call(pluginId: String, tool: String, params: Map<String, Any?>, cwd: String?): Map<String, Any?> =
        host.call(pluginId, tool, params, cwd)
    override fun visible(pluginId: String, cwd: String): Boolean = host.visible(pluginId, cwd)
    override fun options(pluginId: String, configId: String): List<Map<String, Any?>> = host.options(pluginId, configId)
    override fun setConfigValue(id: String, key: String, value: Any?) = host.setConfigValue(id, key, value)
    override fun parseDocument(mime: String, data: ByteArray): Map<String, Any?> = host.parseDocument(mime, data)
    override val pluginsDir: String get() = host.pluginsDir

    override fun viewUrl(pluginId: String, viewId: String?): String {
        synchronized(viewsLock) {
            if (!viewsStarted) {
                ViewServer.start(host)
                viewsStarted = true
            }
        }
        return try {
            ViewServer.url(host, pluginId, viewId)
        } catch (e: QwenCompanionException.Call) {
            // Stopped behind our back (another part of the IDE): start it again once.
            if (e.status != QcStatus.NOT_RUNNING) throw e
            ViewServer.start(host)
            ViewServer.url(host, pluginId, viewId)
        }
    }
}
