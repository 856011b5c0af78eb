package qwen.companion.intellij.core.plugins

/** A manifest `commands[]` entry (or a keybinding's tool): one IDE action. */
data class PluginCommand(
    val pluginId: String,
    val pluginName: String,
    val tool: String,
    val title: String,
    val icon: String?,
    /** The manifest's key (`mod+shift+d`), or null. */
    val key: String?,
    val actionId: String
)

/** A `menus.<location>[]` entry. */
data class PluginMenuItem(
    val location: String,
    val pluginId: String,
    val tool: String,
    val title: String,
    val icon: String?,
    val actionId: String
)

/** The manifest's `sessionAction`. */
data class PluginSessionAction(
    val pluginId: String,
    val pluginName: String,
    val tool: String,
    val icon: String?,
    val tooltip: String,
    /** Called with empty params; the action shows when `details.visible` is true. Null: always shown. */
    val visibleTool: String?,
    val actionId: String
)

/** A `configuration[]` entry. */
data class PluginConfigEntry(
    val pluginId: String,
    val id: String,
    val label: String,
    /** `select`, `boolean`, `string` or `number`. */
    val type: String,
    val optionsTool: String?,
    val defaultValue: Any?
)

/** A `documentParsers[]` entry. */
data class PluginDocumentParser(val pluginId: String, val mimeType: String, val toolName: String)

/** A `views[]` entry. */
data class PluginView(
    val pluginId: String,
    val pluginName: String,
    val id: String,
    val title: String,
    val icon: String?,
    val width: Int?
) {
    /** The IntelliJ tool window id of this view (unique per plugin and view). */
    val toolWindowId: String get() = "Qwen: $title ($pluginId/$id)"
}

/** The manifest's `ui` floating panel. */
data class PluginPanel(val pluginId: String, val pluginName: String, val title: String)

/** What every enabled plugin contributes to the IDE, from the manifests of `list()`. */
data class Contributions(
    val commands: List<PluginCommand>,
    val menus: Map<String, List<PluginMenuItem>>,
    val sessionActions: List<PluginSessionAction>,
    val configuration: Map<String, List<PluginConfigEntry>>,
    val parsers: List<PluginDocumentParser>,
    val views: List<PluginView>,
    val panels: List<PluginPanel>,
    /** `pluginId/tool` of every tool with `renderAs: "checklist"`. */
    val checklistTools: Set<String>,
    /** Plugins skipped or entries ignored, one sentence each. */
    val problems: List<String>
) {
    fun isChecklist(pluginId: String, tool: String): Boolean = checklistTools.contains("$pluginId/$tool")

    /** The parser for [mimeType] (the first plugin, by id, that declares it). */
    fun parserFor(mimeType: String): PluginDocumentParser? = parsers.firstOrNull { it.mimeType.equals(mimeType, ignoreCase = true) }

    companion object {
        val EMPTY = Contributions(emptyList(), emptyMap(), emptyList(), emptyMap(), emptyList(), emptyList(), emptyList(), emptySet(), emptyList())

        /** The IDE action id of [tool] of [pluginId] (`location` for a menu entry's own action). */
        fun actionId(pluginId: String, tool: String, location: String? = null): String =
            "qwen.plugin.$pluginId.$tool" + (if (location == null) "" else "@$location")

        /**
         * Collects the contributions of the enabled, valid plugins of
         * [entries] (`QwenPluginHost.list()`, each with its `manifest`).
         * Malformed entries are skipped and reported in [Contributions.problems],
         * never thrown.
         */
        fun collect(entries: List<Map<String, Any?>>): Contributions {
            val commands = ArrayList<PluginCommand>()
            val menus = LinkedHashMap<String, MutableList<PluginMenuItem>>()
            val sessionActions = ArrayList<PluginSessionAction>()
            val configuration = LinkedHashMap<String, List<PluginConfigEntry>>()
            val parsers = ArrayList<PluginDocumentParser>()
            val views = ArrayList<PluginView>()
            val panels = ArrayList<PluginPanel>()
            val checklist = LinkedHashSet<String>()
            val problems = ArrayList<String>()
            for (e in entries.sortedBy { it["id"]?.toString() ?: "" }) {
                val id = e["id"] as? String ?: continue
                if (e["enabled"] != true) continue
                if (e["error"] != null) {
                    problems.add("$id is broken: ${(e["error"] as? Map<*, *>)?.get("message") ?: e["error"]}")
                    continue
                }
                val m = e["manifest"] as? Map<*, *>
                if (m == null) {
                    problems.add("$id: the library gave no manifest")
                    continue
                }
                val name = m["name"] as? String ?: e["name"] as? String ?: id
                val tools = objects(m["tools"])
                val toolNames = tools.mapNotNull { it["name"] as? String }.toSet()
                for (t in tools) {
                    if (t["renderAs"] == "checklist") (t["name"] as? String)?.let { checklist.add("$id/$it") }
                }
                fun known(tool: String?, where: String): Boolean {
                    if (tool != null && toolNames.contains(tool)) return true
                    problems.add("$id: $where names tool '${tool ?: ""}' that the manifest does not declare")
                    return false
                }
                val keys = LinkedHashMap<String, String>()
                for (k in objects(m["keybindings"])) {
                    val c = k["command"] as? String
                    val key = k["key"] as? String
                    if (c != null && key != null && known(c, "keybinding '$key'")) keys[c] = key
                }
                val commandTools = HashSet<String>()
                for (c in objects(m["commands"])) {
                    val tool = c["tool"] as? String
                    if (!known(tool, "command '${c["title"] ?: ""}'")) continue
                    commandTools.add(tool!!)
                    commands.add(PluginCommand(id, name, tool, c["title"] as? String ?: tool, c["icon"] as? String, keys[tool], actionId(id, tool)))
                }
                // A keybinding for a tool without a commands[] entry still gets its action.
                for ((tool, key) in keys) {
                    if (commandTools.contains(tool)) continue
                    val summary = tools.firstOrNull { it["name"] == tool }?.get("summary") as? String
                    commands.add(PluginCommand(id, name, tool, summary ?: tool, null, key, actionId(id, tool)))
                }
                val menuMap = m["menus"] as? Map<*, *>
                if (menuMap != null) {
                    for ((loc, items) in menuMap) {
                        val location = loc.toString()
                        for (i in objects(items)) {
                            val tool = i["tool"] as? String
                            if (!known(tool, "menu '$location'")) continue
                            menus.getOrPut(location) { ArrayList() }
                                .add(PluginMenuItem(location, id, tool!!, i["title"] as? String ?: tool, i["icon"] as? String, actionId(id, tool, location)))
                        }
                    }
                }
                val sa = m["sessionAction"] as? Map<*, *>
                if (sa != null) {
                    val tool = sa["tool"] as? String
                    val vt = sa["visibleTool"] as? String
                    if (known(tool, "sessionAction") && (vt == null || known(vt, "sessionAction.visibleTool"))) {
                        sessionActions.add(PluginSessionAction(id, name, tool!!, sa["icon"] as? String, sa["tooltip"] as? String ?: tool, vt, actionId(id, tool, "session")))
                    }
                }
                val cfg = ArrayList<PluginConfigEntry>()
                for (c in objects(m["configuration"])) {
                    val cid = c["id"] as? String ?: continue
                    val type = c["type"] as? String ?: continue
                    if (type !in CONFIG_TYPES) {
                        problems.add("$id: configuration '$cid' has unknown type '$type'")
                        continue
                    }
                    cfg.add(PluginConfigEntry(id, cid, c["label"] as? String ?: cid, type, c["optionsTool"] as? String, c["defaultValue"]))
                }
                if (cfg.isNotEmpty()) configuration[id] = cfg
                for (p in objects(m["documentParsers"])) {
                    val mime = p["mimeType"] as? String ?: continue
                    val tool = p["toolName"] as? String ?: continue
                    parsers.add(PluginDocumentParser(id, mime, tool))
                }
                for (v in objects(m["views"])) {
                    val vid = v["id"] as? String ?: continue
                    views.add(PluginView(id, name, vid, v["title"] as? String ?: vid, v["icon"] as? String, (v["width"] as? Number)?.toInt()))
                }
                val ui = m["ui"] as? Map<*, *>
                if (ui != null) panels.add(PluginPanel(id, name, ui["title"] as? String ?: name))
            }
            return Contributions(commands, menus, sessionActions, configuration, parsers, views, panels, checklist, problems)
        }

        private val CONFIG_TYPES = setOf("select", "boolean", "string", "number")

        @Suppress("UNCHECKED_CAST")
        private fun objects(v: Any?): List<Map<String, Any?>> =
            (v as? List<*>)?.mapNotNull { it as? Map<String, Any?> } ?: emptyList()
    }
}
