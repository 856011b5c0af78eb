"""IntelliJ Platform API stubs for the plugin-UI and cross-session glue
(examples/intellij/src/main/kotlin/qwen/companion/intellij/{ui,sessions}/),
merged into intellij_api_stubs.py's tables by extend(): NEW classes, and
EXTRA members added to classes that table already has. Signatures copied by
hand from the platform sources (2024.3); like the base table, they only let
kotlinc type-check the glue, they are not the SDK.
"""

P = "com.intellij.openapi.project.Project"
VF = "com.intellij.openapi.vfs.VirtualFile"
JC = "javax.swing.JComponent"

NEW = {
    # actions, keymap
    "com.intellij.openapi.actionSystem.ActionManager":
        "public abstract class ActionManager { public static ActionManager getInstance(){return null;} public abstract AnAction getAction(String id); public abstract void registerAction(String id, AnAction a); public abstract void unregisterAction(String id); }",
    "com.intellij.openapi.actionSystem.ActionGroup":
        "public abstract class ActionGroup extends AnAction { public ActionGroup(){} }",
    "com.intellij.openapi.actionSystem.DefaultActionGroup":
        "public class DefaultActionGroup extends ActionGroup { public DefaultActionGroup(){} public final void add(AnAction a){} public final void remove(AnAction a){} public void actionPerformed(AnActionEvent e){} }",
    "com.intellij.openapi.actionSystem.Shortcut":
        "public abstract class Shortcut {}",
    "com.intellij.openapi.actionSystem.KeyboardShortcut":
        "public final class KeyboardShortcut extends Shortcut { public KeyboardShortcut(javax.swing.KeyStroke first, javax.swing.KeyStroke second){} }",
    "com.intellij.openapi.actionSystem.DataKey":
        "public final class DataKey<T> { public static <T> DataKey<T> create(String n){return null;} }",
    "com.intellij.openapi.actionSystem.CommonDataKeys":
        "public class CommonDataKeys { public static final DataKey<com.intellij.openapi.editor.Editor> EDITOR = null; public static final DataKey<" + P + "> PROJECT = null; }",
    "com.intellij.openapi.keymap.Keymap":
        "public interface Keymap { void addShortcut(String actionId, com.intellij.openapi.actionSystem.Shortcut s); void removeAllActionShortcuts(String actionId); com.intellij.openapi.actionSystem.Shortcut[] getShortcuts(String actionId); String[] getActionIds(javax.swing.KeyStroke firstKeyStroke); }",
    "com.intellij.openapi.keymap.KeymapManager":
        "public abstract class KeymapManager { public static KeymapManager getInstance(){return null;} public abstract Keymap getActiveKeymap(); }",
    "com.intellij.openapi.project.DumbAware":
        "public interface DumbAware {}",
    # tool windows and contents
    "com.intellij.openapi.wm.ToolWindowAnchor":
        "public final class ToolWindowAnchor { public static final ToolWindowAnchor TOP = null; public static final ToolWindowAnchor LEFT = null; public static final ToolWindowAnchor BOTTOM = null; public static final ToolWindowAnchor RIGHT = null; }",
    "com.intellij.openapi.wm.ToolWindow":
        "public interface ToolWindow { String getId(); com.intellij.ui.content.ContentManager getContentManager(); void show(Runnable r); void show(); void activate(Runnable r); boolean isVisible(); " + JC + " getComponent(); }",
    "com.intellij.openapi.wm.ToolWindowFactory":
        "public interface ToolWindowFactory { void createToolWindowContent(" + P + " project, ToolWindow toolWindow); default boolean shouldBeAvailable(" + P + " project){return true;} }",
    "com.intellij.openapi.wm.ex.ToolWindowManagerListener":
        "public interface ToolWindowManagerListener extends java.util.EventListener { com.intellij.util.messages.Topic<ToolWindowManagerListener> TOPIC = null; default void toolWindowShown(com.intellij.openapi.wm.ToolWindow toolWindow){} }",
    "com.intellij.ui.content.Content":
        "public interface Content extends com.intellij.openapi.util.UserDataHolder { " + JC + " getComponent(); <T> T getUserData(com.intellij.openapi.util.Key<T> k); void setDisposer(com.intellij.openapi.Disposable d); }",
    "com.intellij.ui.content.ContentManager":
        "public interface ContentManager extends com.intellij.openapi.Disposable { void addContent(Content c); boolean removeAllContents(boolean dispose); Content[] getContents(); void setSelectedContent(Content c); }",
    "com.intellij.ui.content.ContentFactory":
        "public interface ContentFactory { static ContentFactory getInstance(){return null;} Content createContent(" + JC + " component, String displayName, boolean isLockable); }",
    # JCEF, colours
    "com.intellij.ui.jcef.JBCefApp":
        "public final class JBCefApp { public static boolean isSupported(){return false;} }",
    "com.intellij.ui.jcef.JBCefBrowser":
        "public class JBCefBrowser implements com.intellij.openapi.Disposable { public JBCefBrowser(String url){} public " + JC + " getComponent(){return null;} public void loadURL(String url){} public void dispose(){} }",
    "com.intellij.ui.JBColor":
        "public class JBColor extends java.awt.Color { public JBColor(int rgb, int dark){ super(rgb);} public static boolean isBright(){return true;} }",
    # popups, dialogs, file chooser
    "com.intellij.openapi.ui.popup.JBPopup":
        "public interface JBPopup extends com.intellij.openapi.Disposable { void showCenteredInCurrentWindow(" + P + " project); void cancel(); }",
    "com.intellij.openapi.ui.popup.ComponentPopupBuilder":
        "public interface ComponentPopupBuilder { ComponentPopupBuilder setTitle(String t); ComponentPopupBuilder setResizable(boolean b); ComponentPopupBuilder setMovable(boolean b); ComponentPopupBuilder setRequestFocus(boolean b); JBPopup createPopup(); }",
    "com.intellij.openapi.ui.popup.IPopupChooserBuilder":
        "public interface IPopupChooserBuilder<T> { IPopupChooserBuilder<T> setTitle(String t); IPopupChooserBuilder<T> setItemChosenCallback(com.intellij.util.Consumer<? super T> c); JBPopup createPopup(); }",
    "com.intellij.openapi.ui.popup.JBPopupFactory":
        "public abstract class JBPopupFactory { public static JBPopupFactory getInstance(){return null;} public abstract ComponentPopupBuilder createComponentPopupBuilder(" + JC + " content, " + JC + " preferableFocusComponent); public <T> IPopupChooserBuilder<T> createPopupChooserBuilder(java.util.List<? extends T> list){return null;} }",
    "com.intellij.openapi.ui.InputValidator":
        "public interface InputValidator { boolean checkInput(String s); boolean canClose(String s); }",
    "com.intellij.openapi.ui.Messages":
        "public class Messages { public static final int YES = 0; public static final int NO = 1; public static final int CANCEL = 2; public static javax.swing.Icon getQuestionIcon(){return null;} "
        "public static int showYesNoCancelDialog(" + P + " project, String message, String title, String yes, String no, String cancel, javax.swing.Icon icon){return CANCEL;} "
        "public static String showMultilineInputDialog(" + P + " project, String message, String title, String initialText, javax.swing.Icon icon, InputValidator validator){return null;} }",
    "com.intellij.openapi.fileChooser.FileChooserDescriptor":
        "public class FileChooserDescriptor { public FileChooserDescriptor(boolean chooseFiles, boolean chooseFolders, boolean chooseJars, boolean chooseJarsAsFiles, boolean chooseJarContents, boolean chooseMultiple){} public String getTitle(){return null;} public void setTitle(String t){} }",
    "com.intellij.openapi.fileChooser.FileChooser":
        "public final class FileChooser { public static " + VF + " chooseFile(FileChooserDescriptor d, " + P + " project, " + VF + " toSelect){return null;} }",
    "com.intellij.openapi.fileEditor.OpenFileDescriptor":
        "public class OpenFileDescriptor { public OpenFileDescriptor(" + P + " project, " + VF + " file, int logicalLine, int logicalColumn){} public void navigate(boolean requestFocus){} }",
    # theme
    "com.intellij.ide.ui.LafManager":
        "public abstract class LafManager { public static LafManager getInstance(){return null;} }",
    "com.intellij.ide.ui.LafManagerListener":
        "@FunctionalInterface public interface LafManagerListener extends java.util.EventListener { com.intellij.util.messages.Topic<LafManagerListener> TOPIC = null; void lookAndFeelChanged(LafManager source); }",
    # settings
    "com.intellij.openapi.options.ConfigurationException":
        "public class ConfigurationException extends Exception { public ConfigurationException(String message){ super(message);} }",
    "com.intellij.openapi.options.UnnamedConfigurable":
        "public interface UnnamedConfigurable { " + JC + " createComponent(); boolean isModified(); void apply() throws ConfigurationException; default void reset(){} default void disposeUIResources(){} }",
    "com.intellij.openapi.options.Configurable":
        "public interface Configurable extends UnnamedConfigurable { String getDisplayName(); }",
    "com.intellij.ide.util.PropertiesComponent":
        "public abstract class PropertiesComponent { public static PropertiesComponent getInstance(" + P + " project){return null;} public abstract String getValue(String name); public abstract void setValue(String name, String value); }",
    # run consoles
    "com.intellij.execution.configurations.RunProfile":
        "public interface RunProfile { String getName(); }",
    "com.intellij.execution.runners.ExecutionEnvironment":
        "public final class ExecutionEnvironment { public com.intellij.execution.configurations.RunProfile getRunProfile(){return null;} }",
    "com.intellij.execution.process.ProcessEvent":
        "public class ProcessEvent extends java.util.EventObject { public ProcessEvent(ProcessHandler source){ super(source);} public String getText(){return null;} }",
    "com.intellij.execution.process.ProcessListener":
        "public interface ProcessListener extends java.util.EventListener { default void startNotified(ProcessEvent e){} default void processTerminated(ProcessEvent e){} default void onTextAvailable(ProcessEvent event, com.intellij.openapi.util.Key outputType){} }",
    "com.intellij.execution.process.ProcessHandler":
        "public abstract class ProcessHandler { public void addProcessListener(ProcessListener l){} }",
    "com.intellij.execution.ExecutionListener":
        "public interface ExecutionListener extends java.util.EventListener { default void processStarted(String executorId, com.intellij.execution.runners.ExecutionEnvironment env, com.intellij.execution.process.ProcessHandler handler){} }",
    "com.intellij.execution.ExecutionManager":
        "public abstract class ExecutionManager { public static final com.intellij.util.messages.Topic<ExecutionListener> EXECUTION_TOPIC = null; }",
}

# Members added to classes of the base table (skipped when the base already has them).
EXTRA = {
    "com.intellij.openapi.actionSystem.AnActionEvent": [
        "public " + P + " getProject(){return null;}",
        "public <T> T getData(DataKey<T> key){return null;}",
    ],
    "com.intellij.openapi.actionSystem.Presentation": [
        "public void setEnabledAndVisible(boolean b){}",
        "public boolean isEnabledAndVisible(){return true;}",
    ],
    "com.intellij.openapi.editor.SelectionModel": [
        "int getSelectionStart();",
        "int getSelectionEnd();",
    ],
    "com.intellij.openapi.fileEditor.FileEditorManager": [
        "public abstract FileEditor[] openFile(" + VF + " file, boolean focusEditor);",
    ],
    "com.intellij.openapi.vfs.LocalFileSystem": [
        "public abstract VirtualFile refreshAndFindFileByPath(String path);",
    ],
    "com.intellij.openapi.util.Disposer": [
        "public static com.intellij.openapi.Disposable newDisposable(String debugName){return null;}",
        "public static void dispose(com.intellij.openapi.Disposable d){}",
    ],
    "com.intellij.openapi.application.Application": [
        "com.intellij.util.messages.MessageBus getMessageBus();",
    ],
}

KOTLIN = {
    # ToolWindowManager is Kotlin in the platform (its registerToolWindow takes a builder lambda with receiver).
    "stubs_ui_twm.kt": """package com.intellij.openapi.wm
import com.intellij.openapi.project.Project
import java.util.function.Supplier
import javax.swing.Icon

class RegisterToolWindowTaskBuilder internal constructor(@JvmField val id: String) {
    @JvmField var icon: Icon? = null
    @JvmField var anchor: ToolWindowAnchor = ToolWindowAnchor.BOTTOM
    @JvmField var sideTool: Boolean = false
    @JvmField var canCloseContent: Boolean = true
    @JvmField var shouldBeAvailable: Boolean = true
    @JvmField var stripeTitle: Supplier<String>? = null
    @JvmField var contentFactory: ToolWindowFactory? = null
}

abstract class ToolWindowManager {
    companion object {
        @JvmStatic fun getInstance(project: Project): ToolWindowManager = throw UnsupportedOperationException()
    }
    abstract fun getToolWindow(id: String?): ToolWindow?
    abstract fun unregisterToolWindow(id: String)
    fun registerToolWindow(id: String, builder: RegisterToolWindowTaskBuilder.() -> Unit): ToolWindow = throw UnsupportedOperationException()
}
""",
}


def members(body):
    """The members of a one-line class body (between its first '{' and last '}')."""
    inner = body[body.index("{") + 1:body.rindex("}")]
    out, depth, cur = [], 0, ""
    for ch in inner:
        cur += ch
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                out.append(cur.strip())
                cur = ""
        elif ch == ";" and depth == 0:
            out.append(cur.strip())
            cur = ""
    return [m for m in out if m]


def signature(member):
    return member.split("{")[0].split(";")[0].strip()


def add_members(java, fq, new_members):
    body = java[fq]
    have = {signature(m) for m in members(body)}
    add = [m for m in new_members if signature(m) not in have]
    end = body.rindex("}")
    java[fq] = body[:end] + " " + " ".join(add) + " " + body[end:]


def extend(java, kotlin):
    for fq, body in NEW.items():
        if fq in java:
            # The base table gained this class meanwhile: keep it, add what ours has more.
            add_members(java, fq, members(body))
        else:
            java[fq] = body
    for fq, extra in EXTRA.items():
        add_members(java, fq, extra)
    for name, text in KOTLIN.items():
        if name in kotlin:
            raise SystemExit("intellij_ui_stubs: %s exists" % name)
        kotlin[name] = text
