package qwen.companion.tests

import qwen.companion.Json
import java.io.BufferedReader
import java.io.Closeable
import java.io.InputStream
import java.io.InputStreamReader
import java.net.URI
import java.net.http.HttpClient
import java.net.http.HttpRequest
import java.net.http.HttpResponse
import java.nio.charset.StandardCharsets
import java.time.Duration
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicInteger

typealias JsonObject = Map<String, Any?>

@Suppress("UNCHECKED_CAST")
fun JsonObject.obj(key: String): JsonObject = this[key] as? JsonObject ?: throw AssertionError("no object '$key' in ${Json.write(this)}")

@Suppress("UNCHECKED_CAST")
fun JsonObject.list(key: String): List<Any?> = this[key] as? List<Any?> ?: throw AssertionError("no array '$key' in ${Json.write(this)}")

fun JsonObject.str(key: String): String? = this[key] as? String

/**
 * Reads SSE events from [input] and hands each JSON `data` payload to
 * [onMessage]; comment lines and events without data (keep-alives) go to [onKeepAlive].
 */
fun readSse(input: InputStream, onKeepAlive: () -> Unit = {}, onMessage: (JsonObject) -> Boolean) {
    val reader = BufferedReader(InputStreamReader(input, StandardCharsets.UTF_8))
    val data = StringBuilder()
    var hasData = false
    while (true) {
        val line = reader.readLine() ?: break
        if (line.length == 0) {
            if (hasData) {
                val payload = data.toString()
                data.setLength(0)
                hasData = false
                if (payload.trim().length > 0) {
                    @Suppress("UNCHECKED_CAST")
                    if (!onMessage(Json.parse(payload) as JsonObject)) return
                } else {
                    onKeepAlive()
                }
            }
            continue
        }
        if (line.startsWith(":")) { // comment / keep-alive
            onKeepAlive()
            continue
        }
        val colon = line.indexOf(':')
        val field = if (colon < 0) line else line.substring(0, colon)
        var value = if (colon < 0) "" else line.substring(colon + 1)
        if (value.startsWith(" ")) value = value.substring(1)
        if (field == "data") {
            if (hasData) data.append('\n')
            data.append(value)
            hasData = true
        }
    }
}

/** The result of one POST: status, headers and the JSON-RPC messages of the body (JSON or SSE). */
class PostResult(val status: Int, val headers: java.net.http.HttpHeaders, val messages: List<JsonObject>, val body: String?)

/**
 * A raw MCP streamable-HTTP client (HTTP/1.1, JDK HttpClient), doing exactly
 * what Qwen Code's TS SDK transport does (ide-cli-behaviour.md §5).
 */
class McpClient(val port: Int, val token: String?) : Closeable {
    val http: HttpClient = HttpClient.newBuilder()
        .version(HttpClient.Version.HTTP_1_1)
        .connectTimeout(Duration.ofSeconds(5))
        .build()
    val url: URI = URI.create("http://127.0.0.1:$port/mcp")
    var sessionId: String? = null
    var protocolVersion = "2025-11-25"
    private val ids = AtomicInteger(0)
    private val streams = ArrayList<SseStream>()

    private fun builder(accept: String): HttpRequest.Builder {
        val b = HttpRequest.newBuilder(url).timeout(Duration.ofSeconds(30)).header("Accept", accept)
        if (token != null) b.header("Authorization", "Bearer $token")
        val sid = sessionId
        if (sid != null) {
            b.header("mcp-session-id", sid)
            b.header("mcp-protocol-version", protocolVersion)
        }
        return b
    }

    /** POSTs one message; stops reading an SSE body at the response to [waitForId] (if given). */
    fun post(message: JsonObject, extraHeaders: Map<String, String> = emptyMap(), waitForId: Any? = null): PostResult {
        val b = builder("application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(Json.write(message), StandardCharsets.UTF_8))
        for ((k, v) in extraHeaders) b.header(k, v)
        val resp = http.send(b.build(), HttpResponse.BodyHandlers.ofInputStream())
        val type = resp.headers().firstValue("content-type").orElse("")
        val messages = ArrayList<JsonObject>()
        var body: String? = null
        resp.body().use { input ->
            if (type.startsWith("text/event-stream")) {
                readSse(input) { m ->
                    messages.add(m)
                    !(waitForId != null && m["id"] == waitForId && (m.containsKey("result") || m.containsKey("error")))
                }
            } else {
                body = String(input.readBytes(), StandardCharsets.UTF_8)
                val text = body!!
                if (type.startsWith("application/json") && text.trim().length > 0) {
                    @Suppress("UNCHECKED_CAST")
                    messages.add(Json.parse(text) as JsonObject)
                }
            }
        }
        return PostResult(resp.statusCode(), resp.headers(), messages, body)
    }

    /** Sends a JSON-RPC request and returns its response message (result or error). */
    fun request(method: String, params: JsonObject = emptyMap()): JsonObject {
        val id = ids.incrementAndGet().toLong()
        val r = post(mapOf("jsonrpc" to "2.0", "id" to id, "method" to method, "params" to params), waitForId = id)
        if (r.status != 200) throw AssertionError("$method: HTTP ${r.status} ${r.body ?: ""}")
        return r.messages.firstOrNull { it["id"] == id } ?: throw AssertionError("$method: no response in ${r.messages}")
    }

    /** initialize; keeps the session id and negotiated protocol version; returns the result. */
    fun initialize(): JsonObject {
        val id = ids.incrementAndGet().toLong()
        val r = post(mapOf(
            "jsonrpc" to "2.0", "id" to id, "method" to "initialize",
            "params" to mapOf(
                "protocolVersion" to protocolVersion,
                "capabilities" to emptyMap<String, Any>(),
                "clientInfo" to mapOf("name" to "kotlin-test-client", "version" to "1.0.0")
            )
        ), waitForId = id)
        if (r.status != 200) throw AssertionError("initialize: HTTP ${r.status} ${r.body ?: ""}")
        sessionId = r.headers.firstValue("mcp-session-id").orElseThrow { AssertionError("initialize: no Mcp-Session-Id header") }
        val msg = r.messages.firstOrNull { it["id"] == id } ?: throw AssertionError("initialize: no response")
        val result = msg.obj("result")
        result.str("protocolVersion")?.let { protocolVersion = it }
        return result
    }

    /** notifications/initialized; returns the HTTP status (must be 202). */
    fun initialized(): Int =
        post(mapOf("jsonrpc" to "2.0", "method" to "notifications/initialized")).status

    /** tools/call; returns the `result` object (throws on a JSON-RPC error). */
    fun callTool(name: String, arguments: JsonObject): JsonObject {
        val msg = request("tools/call", mapOf("name" to name, "arguments" to arguments))
        if (msg.containsKey("error")) throw AssertionError("tools/call $name: ${Json.write(msg["error"])}")
        return msg.obj("result")
    }

    /** Opens the GET SSE stream (the notification channel). */
    fun openStream(): SseStream {
        val req = builder("text/event-stream").GET().build()
        val resp = http.send(req, HttpResponse.BodyHandlers.ofInputStream())
        val s = SseStream(resp.statusCode(), resp.headers().firstValue("content-type").orElse(""), resp.body())
        synchronized(streams) { streams.add(s) }
        return s
    }

    override fun close() {
        synchronized(streams) { for (s in streams) s.close() }
    }
}

/** A GET SSE stream read on a background thread; messages are kept for [await]. */
class SseStream(val status: Int, val contentType: String, private val input: InputStream) : Closeable {
    private val lock = Object()
    private val received = ArrayList<JsonObject>()
    private val consumed = HashSet<Int>()
    @Volatile var ended = false
        private set
    @Volatile var failure: Throwable? = null
        private set
    /** Keep-alive comments / empty events seen so far. */
    val keepAlives = java.util.concurrent.atomic.AtomicInteger()

    private val reader = Thread({
        try {
            readSse(input, { keepAlives.incrementAndGet() }) { m ->
                synchronized(lock) {
                    received.add(m)
                    lock.notifyAll()
                }
                true
            }
        } catch (t: Throwable) {
            failure = t
        } finally {
            synchronized(lock) {
                ended = true
                lock.notifyAll()
            }
        }
    }, "sse-reader")

    init {
        reader.isDaemon = true
        if (status == 200) reader.start() else ended = true
    }

    /** Every message received so far. */
    fun all(): List<JsonObject> = synchronized(lock) { ArrayList(received) }

    /** Waits for the first not yet consumed message matching [match]; marks it consumed. */
    fun await(timeoutMs: Long, what: String, match: (JsonObject) -> Boolean): JsonObject {
        val deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs)
        synchronized(lock) {
            while (true) {
                for (i in received.indices) {
                    if (!consumed.contains(i) && match(received[i])) {
                        consumed.add(i)
                        return received[i]
                    }
                }
                val left = deadline - System.nanoTime()
                if (left <= 0 || ended) {
                    throw AssertionError("no $what within ${timeoutMs} ms (stream ended=$ended); received: " +
                        received.joinToString("; ") { Json.write(it) }.take(3000))
                }
                lock.wait(TimeUnit.NANOSECONDS.toMillis(left) + 1)
            }
        }
    }

    /** Waits for a notification [method] whose params satisfy [match]. */
    fun awaitNotification(method: String, timeoutMs: Long = 5000, match: (JsonObject) -> Boolean = { true }): JsonObject =
        await(timeoutMs, method) { m -> m["method"] == method && match(m["params"] as? JsonObject ?: emptyMap()) }.obj("params")

    /** Waits until the server ends the stream. */
    fun awaitEnd(timeoutMs: Long): Boolean {
        val deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs)
        synchronized(lock) {
            while (!ended) {
                val left = deadline - System.nanoTime()
                if (left <= 0) return false
                lock.wait(TimeUnit.NANOSECONDS.toMillis(left) + 1)
            }
        }
        return true
    }

    override fun close() {
        try {
            input.close()
        } catch (e: Exception) {
        }
    }
}
