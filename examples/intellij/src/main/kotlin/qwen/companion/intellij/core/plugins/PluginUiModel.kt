package qwen.companion.intellij.core.plugins

import qwen.companion.QwenCompanionException

/** A `show_notification` request of a plugin, as the IDE shows it. */
data class PluginNotification(
    val pluginId: String,
    val title: String,
    val body: String,
    /** The view a click opens (`params.view` the host adds for `viewId`), or null. */
    val viewId: String?,
    val viewTitle: String?,
    val viewUrl: String?
) {
    companion object {
        /**
         * From the capability request `{id, plugin, capability, params}`;
         * `params.view` is `{id, title, url}` when the plugin's `viewId`
         * names one of its views and the view server runs. A `viewId`
         * without `view` still names the view (opened by its tool window).
         */
        fun of(request: Map<String, Any?>): PluginNotification {
            val plugin = request["plugin"] as? String ?: ""
            val p = request["params"] as? Map<*, *> ?: emptyMap<String, Any?>()
            val view = p["view"] as? Map<*, *>
            val viewId = view?.get("id") as? String ?: p["viewId"] as? String
            val title = (p["title"] as? String)?.takeIf { it.isNotBlank() } ?: plugin
            return PluginNotification(plugin, title, p["body"] as? String ?: "", viewId, view?.get("title") as? String, view?.get("url") as? String)
        }
    }
}

/**
 * The IDE-independent state of the plugin UI: the contributions of the
 * enabled plugins (recomputed on [reload] and on the host's `views_changed`,
 * `plugin_disabled` events), running a tool for an action, the session
 * action's visibility (cached per folder for [visibleTtlMs]) and the view /
 * panel URLs.
 */
class PluginUiModel(
    val backend: PluginBackend,
    private val visibleTtlMs: Long = 5000,
    private val clock: () -> Long = { System.currentTimeMillis() }
) {
    private val lock = Any()
    @Volatile var contributions: Contributions = Contributions.EMPTY
        private set
    @Volatile var lastReloadError: String? = null
        private set
    private val listeners = ArrayList<(Contributions) -> Unit>()
    private val visibleCache = HashMap<String, Pair<Long, Boolean>>()

    /** The plugin manager over the same host (one per model: it remembers what the user enabled). */
    val manager: PluginManagerModel = PluginManagerModel(backend, clock = clock)

    companion object {
        /** Whether host [event] changes the contributions (`views_changed`, `plugin_disabled`); `ui_push` and the rest do not. */
        fun reloads(event: Map<String, Any?>): Boolean = event["type"] == "views_changed" || event["type"] == "plugin_disabled"
    }

    /** [l] runs (on the caller's thread) after every [reload]. */
    fun addListener(l: (Contributions) -> Unit) {
        synchronized(lock) { listeners.add(l) }
    }

    /** Re-reads the plugins; a failing list keeps the previous contributions and sets [lastReloadError]. */
    fun reload(): Contributions {
        val c = try {
            Contributions.collect(backend.list()).also { lastReloadError = null }
        } catch (e: QwenCompanionException.Call) {
            lastReloadError = e.detail
            return contributions
        }
        val ls = synchronized(lock) {
            contributions = c
            visibleCache.clear()
            ArrayList(listeners)
        }
        for (l in ls) l(c)
        return c
    }

    /** A host event: true when it changed the contributions (and [reload] ran). */
    fun onHostEvent(event: Map<String, Any?>): Boolean {
        if (!reloads(event)) return false
        reload()
        return true
    }

    /** Runs [tool] of [pluginId] with [params] in folder [cwd]: its view, or the failure's sentence. */
    fun runTool(pluginId: String, tool: String, params: Map<String, Any?>, cwd: String?): Pair<ToolResultView?, String?> = try {
        val r = backend.call(pluginId, tool, params, cwd)
        Pair(ToolResultView.of(pluginId, tool, params, r, contributions.isChecklist(pluginId, tool)), null)
    } catch (e: QwenCompanionException.Call) {
        Pair(null, "$pluginId/$tool failed: ${e.detail}")
    }

    /** Whether [action] shows for [cwd]: no `visibleTool` = always; a failing probe hides it. */
    fun sessionActionVisible(action: PluginSessionAction, cwd: String): Boolean {
        if (action.visibleTool == null) return true
        val key = "${action.pluginId}\u0000$cwd"
        val now = clock()
        synchronized(lock) {
            val hit = visibleCache[key]
            if (hit != null && now - hit.first < visibleTtlMs) return hit.second
        }
        val v = try {
            backend.visible(action.pluginId, cwd)
        } catch (e: QwenCompanionException.Call) {
            false
        }
        synchronized(lock) { visibleCache[key] = Pair(now, v) }
        return v
    }

    /** The cached visibility of [action] for [cwd], without calling the plugin (null: unknown or stale). */
    fun cachedVisible(action: PluginSessionAction, cwd: String): Boolean? {
        if (action.visibleTool == null) return true
        synchronized(lock) {
            val hit = visibleCache["${action.pluginId}\u0000$cwd"] ?: return null
            return if (clock() - hit.first < visibleTtlMs) hit.second else null
        }
    }

    fun viewUrl(view: PluginView): String = backend.viewUrl(view.pluginId, view.id)

    fun panelUrl(panel: PluginPanel): String = backend.viewUrl(panel.pluginId, null)

    /** The view [viewId] of [pluginId] among the current contributions. */
    fun findView(pluginId: String, viewId: String): PluginView? =
        contributions.views.firstOrNull { it.pluginId == pluginId && it.id == viewId }
}

/** Where a manifest `menus` location goes in the IDE (an action group id of plugin.xml). */
object MenuPlacement {
    const val SESSION_CONTEXT_GROUP = "Qwen.Plugins.SessionContext"
    const val PLUGINS_GROUP = "Qwen.Plugins.Menu"

    fun groupFor(location: String): String = when (location) {
        "session/context", "session/title" -> SESSION_CONTEXT_GROUP
        else -> PLUGINS_GROUP
    }
}
