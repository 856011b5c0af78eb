#!/usr/bin/env python3
"""Writes minimal Java/Kotlin stubs of the IntelliJ Platform APIs that
examples/intellij/src/main/kotlin/qwen/companion/intellij/*.kt uses, so
bindings/kotlin/run-tests.sh can type-check that platform glue with
Debian's kotlinc (no IntelliJ SDK can be downloaded here).

This only catches Kotlin mistakes (typos, nullability, wrong arity against
these signatures); the signatures were copied by hand from the platform
sources and are NOT a substitute for `./gradlew buildPlugin`.

Usage: intellij_api_stubs.py OUTDIR
"""
import os
import sys

JAVA = {
    "com.intellij.diff.DiffContentFactory":
        "public abstract class DiffContentFactory { public static DiffContentFactory getInstance(){return null;} public abstract com.intellij.diff.contents.DocumentContent create(com.intellij.openapi.project.Project p, String t, com.intellij.openapi.fileTypes.FileType f); public abstract com.intellij.diff.contents.DocumentContent createEditable(com.intellij.openapi.project.Project p, String t, com.intellij.openapi.fileTypes.FileType f); }",
    "com.intellij.diff.DiffDialogHints":
        "public class DiffDialogHints { public DiffDialogHints(com.intellij.openapi.ui.WindowWrapper.Mode m, java.awt.Component p, com.intellij.util.Consumer<com.intellij.openapi.ui.WindowWrapper> c){} }",
    "com.intellij.diff.DiffManager":
        "public abstract class DiffManager {}",
    "com.intellij.diff.DiffManagerEx":
        "public abstract class DiffManagerEx extends DiffManager { public static DiffManagerEx getInstance(){return null;} public abstract void showDiffBuiltin(com.intellij.openapi.project.Project p, com.intellij.diff.requests.DiffRequest r, DiffDialogHints h); }",
    "com.intellij.diff.contents.DiffContent":
        "public interface DiffContent extends com.intellij.openapi.util.UserDataHolder {}",
    "com.intellij.diff.contents.DocumentContent":
        "public interface DocumentContent extends DiffContent { com.intellij.openapi.editor.Document getDocument(); }",
    "com.intellij.diff.requests.DiffRequest":
        "public abstract class DiffRequest implements com.intellij.openapi.util.UserDataHolder { public <T> void putUserData(com.intellij.openapi.util.Key<T> k, T v){} @org.jetbrains.annotations.Nullable public <T> T getUserData(com.intellij.openapi.util.Key<T> k){return null;} }",
    "com.intellij.diff.chains.DiffRequestChain":
        "public interface DiffRequestChain extends com.intellij.openapi.util.UserDataHolder {}",
    "com.intellij.diff.chains.SimpleDiffRequestChain":
        "public class SimpleDiffRequestChain implements DiffRequestChain { public SimpleDiffRequestChain(com.intellij.diff.requests.DiffRequest request){} public <T> void putUserData(com.intellij.openapi.util.Key<T> k, T v){} }",
    "com.intellij.diff.editor.ChainDiffVirtualFile":
        "public class ChainDiffVirtualFile extends com.intellij.openapi.vfs.VirtualFile { public ChainDiffVirtualFile(com.intellij.diff.chains.DiffRequestChain chain, String name){} public boolean isDirectory(){return false;} public byte[] contentsToByteArray(){return new byte[0];} public String getPath(){return null;} }",
    "com.intellij.diff.editor.DiffEditorTabFilesManager":
        "public interface DiffEditorTabFilesManager { static DiffEditorTabFilesManager getInstance(com.intellij.openapi.project.Project p){return null;} com.intellij.openapi.fileEditor.FileEditor[] showDiffFile(com.intellij.openapi.vfs.VirtualFile diffFile, boolean focusEditor); }",
    "com.intellij.diff.tools.util.DiffDataKeys":
        "public interface DiffDataKeys { com.intellij.openapi.actionSystem.DataKey<com.intellij.diff.requests.DiffRequest> DIFF_REQUEST = null; }",
    "com.intellij.diff.requests.SimpleDiffRequest":
        "public class SimpleDiffRequest extends DiffRequest { public SimpleDiffRequest(String t, com.intellij.diff.contents.DiffContent a, com.intellij.diff.contents.DiffContent b, String ta, String tb){} }",
    "com.intellij.diff.util.DiffUserDataKeys":
        "public interface DiffUserDataKeys { com.intellij.openapi.util.Key<java.util.List<com.intellij.openapi.actionSystem.AnAction>> CONTEXT_ACTIONS = null; }",
    "com.intellij.icons.AllIcons":
        "public class AllIcons { public static final class Actions { public static javax.swing.Icon Checked; public static javax.swing.Icon Cancel; } }",
    "com.intellij.ide.plugins.IdeaPluginDescriptor":
        "public interface IdeaPluginDescriptor { java.nio.file.Path getPluginPath(); }",
    "com.intellij.ide.plugins.PluginManagerCore":
        "public class PluginManagerCore { public static IdeaPluginDescriptor getPlugin(com.intellij.openapi.extensions.PluginId id){return null;} }",
    "com.intellij.notification.Notification":
        "public class Notification { public void notify(com.intellij.openapi.project.Project p){} public Notification addAction(com.intellij.openapi.actionSystem.AnAction a){return this;} public void expire(){} }",
    "com.intellij.notification.NotificationAction":
        "public abstract class NotificationAction extends com.intellij.openapi.project.DumbAwareAction { public NotificationAction(String t){ super(t, null, null);} public static NotificationAction createSimple(String text, Runnable action){return null;} public static NotificationAction createSimpleExpiring(String text, Runnable action){return null;} }",
    "com.intellij.notification.NotificationGroup":
        "public class NotificationGroup { public Notification createNotification(String c, NotificationType t){return null;} public Notification createNotification(String title, String content, NotificationType t){return null;} }",
    "com.intellij.ide.BrowserUtil":
        "public final class BrowserUtil { public static void browse(String url){} public static void browse(java.io.File f){} }",
    "com.intellij.openapi.components.PersistentStateComponent":
        "public interface PersistentStateComponent<T> { T getState(); void loadState(T state); default void noStateLoaded(){} default void initializeComponent(){} }",
    "com.intellij.openapi.components.State":
        "import java.lang.annotation.*; @Retention(RetentionPolicy.RUNTIME) @Target(ElementType.TYPE) public @interface State { String name(); Storage[] storages() default {}; }",
    "com.intellij.openapi.components.Storage":
        "import java.lang.annotation.*; @Retention(RetentionPolicy.RUNTIME) @Target({}) public @interface Storage { String value() default \"\"; }",
    "com.intellij.openapi.options.UnnamedConfigurable":
        "public interface UnnamedConfigurable { javax.swing.JComponent createComponent(); boolean isModified(); void apply() throws ConfigurationException; default void reset(){} default void disposeUIResources(){} }",
    "com.intellij.openapi.options.Configurable":
        "public interface Configurable extends UnnamedConfigurable { String getDisplayName(); }",
    "com.intellij.openapi.options.ConfigurationException":
        "public class ConfigurationException extends Exception { public ConfigurationException(String message){ super(message);} public ConfigurationException(String message, String title){ super(message);} }",
    "com.intellij.openapi.options.ShowSettingsUtil":
        "public abstract class ShowSettingsUtil { public static ShowSettingsUtil getInstance(){return null;} public abstract <T extends Configurable> void showSettingsDialog(com.intellij.openapi.project.Project p, Class<T> configurableClass); }",
    "com.intellij.openapi.wm.StatusBar":
        "public interface StatusBar { void updateWidget(String id); }",
    "com.intellij.openapi.wm.StatusBarWidget":
        "public interface StatusBarWidget extends com.intellij.openapi.Disposable { String ID(); default WidgetPresentation getPresentation(){return null;} default void install(StatusBar statusBar){} default void dispose(){} interface WidgetPresentation { default String getTooltipText(){return null;} default com.intellij.util.Consumer<java.awt.event.MouseEvent> getClickConsumer(){return null;} } interface TextPresentation extends WidgetPresentation { String getText(); float getAlignment(); } }",
    "com.intellij.openapi.wm.StatusBarWidgetFactory":
        "public interface StatusBarWidgetFactory { String getId(); String getDisplayName(); default boolean isAvailable(com.intellij.openapi.project.Project p){return true;} StatusBarWidget createWidget(com.intellij.openapi.project.Project p); default void disposeWidget(StatusBarWidget w){} default boolean canBeEnabledOn(StatusBar sb){return true;} }",
    "org.jetbrains.plugins.terminal.TerminalToolWindowManager":
        "public final class TerminalToolWindowManager { public static TerminalToolWindowManager getInstance(com.intellij.openapi.project.Project p){return null;} public com.intellij.terminal.ui.TerminalWidget createShellWidget(String workingDirectory, String tabName, boolean requestFocus, boolean deferSessionStartUntilUiShown){return null;} }",
    "com.intellij.terminal.ui.TerminalWidget":
        "public interface TerminalWidget { void sendCommandToExecute(String shellCommand); }",
    "com.intellij.openapi.project.ProjectManager":
        "public abstract class ProjectManager { public static ProjectManager getInstance(){return null;} public abstract com.intellij.openapi.project.Project[] getOpenProjects(); }",
    "com.intellij.notification.NotificationGroupManager":
        "public abstract class NotificationGroupManager { public static NotificationGroupManager getInstance(){return null;} public abstract NotificationGroup getNotificationGroup(String id); }",
    "com.intellij.notification.NotificationType":
        "public enum NotificationType { INFORMATION, WARNING, ERROR }",
    "com.intellij.openapi.Disposable":
        "public interface Disposable { void dispose(); }",
    "com.intellij.openapi.actionSystem.ActionManager":
        "public abstract class ActionManager { public static ActionManager getInstance(){return null;} @org.jetbrains.annotations.Nullable public abstract AnAction getAction(String id); }",
    "com.intellij.openapi.actionSystem.ActionPromoter":
        "public interface ActionPromoter { default java.util.List<AnAction> promote(java.util.List<? extends AnAction> actions, DataContext context){return null;} }",
    "com.intellij.openapi.actionSystem.DataContext":
        "public interface DataContext { Object getData(String dataId); }",
    "com.intellij.openapi.actionSystem.DataKey":
        "public final class DataKey<T> { @org.jetbrains.annotations.Nullable public T getData(DataContext c){return null;} }",
    "com.intellij.openapi.actionSystem.ActionUpdateThread":
        "public enum ActionUpdateThread { BGT, EDT }",
    "com.intellij.openapi.actionSystem.AnAction":
        "public abstract class AnAction { public AnAction(){} public AnAction(String t, String d, javax.swing.Icon i){} public abstract void actionPerformed(AnActionEvent e); public void update(AnActionEvent e){} public ActionUpdateThread getActionUpdateThread(){return ActionUpdateThread.BGT;} }",
    "com.intellij.openapi.actionSystem.AnActionEvent":
        "public class AnActionEvent { public Presentation getPresentation(){return null;} @org.jetbrains.annotations.Nullable public com.intellij.openapi.project.Project getProject(){return null;} @org.jetbrains.annotations.Nullable public <T> T getData(DataKey<T> key){return null;} }",
    "com.intellij.openapi.actionSystem.Presentation":
        "public class Presentation { public void setEnabled(boolean b){} public boolean isEnabled(){return true;} public void setVisible(boolean b){} public boolean isVisible(){return true;} }",
    "com.intellij.openapi.application.Application":
        "public interface Application { void invokeLater(Runnable r, com.intellij.openapi.util.Condition<?> expired); void invokeLater(Runnable r, ModalityState s); void invokeLater(Runnable r, ModalityState s, com.intellij.openapi.util.Condition<?> expired); java.util.concurrent.Future<?> executeOnPooledThread(Runnable r); <T> java.util.concurrent.Future<T> executeOnPooledThread(java.util.concurrent.Callable<T> c); com.intellij.util.messages.MessageBus getMessageBus(); boolean isDispatchThread(); boolean isReadAccessAllowed(); boolean isWriteAccessAllowed(); }",
    "com.intellij.openapi.application.ApplicationManager":
        "public class ApplicationManager { public static Application getApplication(){return null;} }",
    "com.intellij.openapi.application.ApplicationNamesInfo":
        "public class ApplicationNamesInfo { public static ApplicationNamesInfo getInstance(){return null;} public String getFullProductName(){return null;} }",
    "com.intellij.openapi.application.ModalityState":
        "public class ModalityState { public static ModalityState defaultModalityState(){return null;} public static ModalityState any(){return null;} }",
    "com.intellij.openapi.components.Service":
        "import java.lang.annotation.*; @Retention(RetentionPolicy.RUNTIME) public @interface Service { Level[] value() default {}; enum Level { APP, PROJECT } }",
    "com.intellij.openapi.diagnostic.Logger":
        "public abstract class Logger { public abstract void info(String m); public abstract void warn(String m, Throwable t); }",
    "com.intellij.openapi.editor.CaretModel":
        "public interface CaretModel { int getOffset(); }",
    "com.intellij.openapi.editor.Document":
        "public interface Document { int getLineNumber(int o); int getLineStartOffset(int l); String getText(); CharSequence getImmutableCharSequence(); CharSequence getCharsSequence(); int getTextLength(); }",
    "com.intellij.openapi.editor.Editor":
        "public interface Editor { com.intellij.openapi.project.Project getProject(); EditorKind getEditorKind(); Document getDocument(); CaretModel getCaretModel(); SelectionModel getSelectionModel(); }",
    "com.intellij.openapi.editor.EditorFactory":
        "public abstract class EditorFactory { public static EditorFactory getInstance(){return null;} public abstract com.intellij.openapi.editor.event.EditorEventMulticaster getEventMulticaster(); }",
    "com.intellij.openapi.editor.EditorKind":
        "public enum EditorKind { UNTYPED, MAIN_EDITOR, DIFF, CONSOLE, PREVIEW }",
    "com.intellij.openapi.editor.SelectionModel":
        "public interface SelectionModel { String getSelectedText(); int getSelectionStart(); int getSelectionEnd(); boolean hasSelection(); }",
    "com.intellij.openapi.editor.event.CaretEvent":
        "public class CaretEvent { public com.intellij.openapi.editor.Editor getEditor(){return null;} }",
    "com.intellij.openapi.editor.event.CaretListener":
        "public interface CaretListener { default void caretPositionChanged(CaretEvent e){} }",
    "com.intellij.openapi.editor.event.EditorEventMulticaster":
        "public interface EditorEventMulticaster { void addCaretListener(CaretListener l, com.intellij.openapi.Disposable d); void addSelectionListener(SelectionListener l, com.intellij.openapi.Disposable d); }",
    "com.intellij.openapi.editor.event.SelectionEvent":
        "public class SelectionEvent { public com.intellij.openapi.editor.Editor getEditor(){return null;} }",
    "com.intellij.openapi.editor.event.SelectionListener":
        "public interface SelectionListener { default void selectionChanged(SelectionEvent e){} }",
    "com.intellij.openapi.extensions.PluginId":
        "public class PluginId { public static PluginId getId(String s){return null;} }",
    "com.intellij.openapi.fileEditor.FileDocumentManager":
        "public abstract class FileDocumentManager { public static FileDocumentManager getInstance(){return null;} public abstract com.intellij.openapi.editor.Document getDocument(com.intellij.openapi.vfs.VirtualFile f); @org.jetbrains.annotations.Nullable public abstract com.intellij.openapi.editor.Document getCachedDocument(com.intellij.openapi.vfs.VirtualFile f); public abstract com.intellij.openapi.vfs.VirtualFile getFile(com.intellij.openapi.editor.Document d); }",
    "com.intellij.openapi.fileEditor.FileEditor":
        "public interface FileEditor {}",
    "com.intellij.openapi.fileEditor.FileEditorManager":
        "public abstract class FileEditorManager { public static FileEditorManager getInstance(com.intellij.openapi.project.Project p){return null;} public abstract com.intellij.openapi.vfs.VirtualFile[] getOpenFiles(); public abstract com.intellij.openapi.vfs.VirtualFile[] getSelectedFiles(); public abstract com.intellij.openapi.editor.Editor getSelectedTextEditor(); public abstract void closeFile(com.intellij.openapi.vfs.VirtualFile f); }",
    "com.intellij.openapi.fileEditor.FileEditorManagerEvent":
        "public class FileEditorManagerEvent { public com.intellij.openapi.vfs.VirtualFile getNewFile(){return null;} public FileEditor getNewEditor(){return null;} }",
    "com.intellij.openapi.fileEditor.FileEditorManagerListener":
        "public interface FileEditorManagerListener { com.intellij.util.messages.Topic<FileEditorManagerListener> FILE_EDITOR_MANAGER = null; default void fileOpened(FileEditorManager s, com.intellij.openapi.vfs.VirtualFile f){} default void fileClosed(FileEditorManager s, com.intellij.openapi.vfs.VirtualFile f){} default void selectionChanged(FileEditorManagerEvent e){} }",
    "com.intellij.openapi.fileEditor.TextEditor":
        "public interface TextEditor extends FileEditor { com.intellij.openapi.editor.Editor getEditor(); }",
    "com.intellij.openapi.fileTypes.FileType":
        "public interface FileType {}",
    "com.intellij.openapi.fileTypes.FileTypeManager":
        "public abstract class FileTypeManager { public static FileTypeManager getInstance(){return null;} public abstract FileType getFileTypeByFileName(String n); }",
    "com.intellij.openapi.project.DumbAwareAction":
        "public abstract class DumbAwareAction extends com.intellij.openapi.actionSystem.AnAction { protected DumbAwareAction(){} protected DumbAwareAction(String t, String d, javax.swing.Icon i){ super(t,d,i);} }",
    "com.intellij.openapi.project.Project":
        "public interface Project { String getName(); boolean isDisposed(); String getBasePath(); com.intellij.util.messages.MessageBus getMessageBus(); com.intellij.openapi.util.Condition<?> getDisposed(); }",
    "com.intellij.openapi.roots.ModuleRootEvent":
        "public abstract class ModuleRootEvent {}",
    "com.intellij.openapi.roots.ModuleRootListener":
        "public interface ModuleRootListener { com.intellij.util.messages.Topic<ModuleRootListener> TOPIC = null; default void rootsChanged(ModuleRootEvent e){} }",
    "com.intellij.openapi.roots.ProjectRootManager":
        "public abstract class ProjectRootManager { public static ProjectRootManager getInstance(com.intellij.openapi.project.Project p){return null;} public abstract com.intellij.openapi.vfs.VirtualFile[] getContentRoots(); }",
    "com.intellij.openapi.ui.WindowWrapper":
        "public interface WindowWrapper extends com.intellij.openapi.Disposable { enum Mode {FRAME, MODAL, NON_MODAL} void close(); }",
    "com.intellij.openapi.util.Condition":
        "public interface Condition<T> { boolean value(T t); }",
    "com.intellij.openapi.util.Disposer":
        "public class Disposer { public static void register(com.intellij.openapi.Disposable p, com.intellij.openapi.Disposable c){} public static com.intellij.openapi.Disposable newDisposable(String debugName){return null;} public static void dispose(com.intellij.openapi.Disposable d){} }",
    "com.intellij.openapi.util.Key":
        "public class Key<T> { public static <T> Key<T> create(String n){return null;} }",
    "com.intellij.openapi.util.UserDataHolder":
        "public interface UserDataHolder { <T> void putUserData(com.intellij.openapi.util.Key<T> k, T v); }",
    "com.intellij.openapi.vfs.LocalFileSystem":
        "public abstract class LocalFileSystem { public static LocalFileSystem getInstance(){return null;} public abstract VirtualFile findFileByPath(String p); }",
    "com.intellij.openapi.vfs.VirtualFile":
        "public abstract class VirtualFile { public static final String PROP_NAME = \"name\"; public abstract boolean isDirectory(); public abstract byte[] contentsToByteArray() throws java.io.IOException; public java.nio.charset.Charset getCharset(){return null;} public abstract String getPath(); public boolean isInLocalFileSystem(){return true;} }",
    "com.intellij.openapi.vfs.VirtualFileManager":
        "public abstract class VirtualFileManager { public static final com.intellij.util.messages.Topic<com.intellij.openapi.vfs.newvfs.BulkFileListener> VFS_CHANGES = null; }",
    "com.intellij.openapi.vfs.newvfs.BulkFileListener":
        "public interface BulkFileListener { default void before(java.util.List<? extends com.intellij.openapi.vfs.newvfs.events.VFileEvent> e){} default void after(java.util.List<? extends com.intellij.openapi.vfs.newvfs.events.VFileEvent> e){} }",
    "com.intellij.openapi.vfs.newvfs.events.VFileDeleteEvent":
        "public abstract class VFileDeleteEvent extends VFileEvent {}",
    "com.intellij.openapi.vfs.newvfs.events.VFileEvent":
        "public abstract class VFileEvent { public String getPath(){return null;} public abstract com.intellij.openapi.vfs.VirtualFile getFile(); }",
    "com.intellij.openapi.vfs.newvfs.events.VFileMoveEvent":
        "public abstract class VFileMoveEvent extends VFileEvent { public String getOldPath(){return null;} public String getNewPath(){return null;} }",
    "com.intellij.openapi.vfs.newvfs.events.VFilePropertyChangeEvent":
        "public abstract class VFilePropertyChangeEvent extends VFileEvent { public String getPropertyName(){return null;} public String getOldPath(){return null;} public String getNewPath(){return null;} }",
    "com.intellij.util.Consumer":
        "public interface Consumer<T> { void consume(T t); }",
    "com.intellij.util.messages.MessageBus":
        "public interface MessageBus { MessageBusConnection connect(com.intellij.openapi.Disposable d); }",
    "com.intellij.util.messages.MessageBusConnection":
        "public interface MessageBusConnection { <L> void subscribe(Topic<L> topic, L handler); }",
    "com.intellij.util.messages.Topic":
        "public class Topic<L> {}",
    "org.jetbrains.annotations.Nullable":
        "import java.lang.annotation.*; @Retention(RetentionPolicy.CLASS) @Target({ElementType.METHOD, ElementType.FIELD, ElementType.PARAMETER, ElementType.LOCAL_VARIABLE}) public @interface Nullable {}",
    "org.jetbrains.plugins.terminal.TerminalProjectOptionsProvider":
        "public class TerminalProjectOptionsProvider { public static TerminalProjectOptionsProvider getInstance(com.intellij.openapi.project.Project p){return null;} public String getShellPath(){return null;} }",
    "com.intellij.openapi.ide.CopyPasteManager":
        "public abstract class CopyPasteManager { public static CopyPasteManager getInstance(){return null;} public abstract void setContents(java.awt.datatransfer.Transferable content); }",
    "org.jetbrains.plugins.terminal.LocalTerminalCustomizer":
        "public abstract class LocalTerminalCustomizer { @Deprecated public String[] customizeCommandAndEnvironment(com.intellij.openapi.project.Project p, String wd, String[] c, java.util.Map<String,String> e){return c;} }",
}

KOTLIN = {
    "stubs.kt": "@file:JvmName(\"Stubs\")\npackage com.intellij.openapi.application\nfun <T> runReadAction(runnable: () -> T): T = runnable()\n",
    "stubs2.kt": "package com.intellij.openapi.components\ninline fun <reified T : Any> com.intellij.openapi.project.Project.service(): T = throw UnsupportedOperationException()\ninline fun <reified T : Any> service(): T = throw UnsupportedOperationException()\n",
    "stubs3.kt": "package com.intellij.openapi.diagnostic\ninline fun <reified T : Any> logger(): Logger = throw UnsupportedOperationException()\n",
    "stubs5.kt": "@file:JvmName(\"TrustedProjects\")\npackage com.intellij.ide.impl\nfun com.intellij.openapi.project.Project.isTrusted(): Boolean = true\n",
    "stubs6.kt": "package com.intellij.ide.trustedProjects\ninterface TrustedProjectsListener {\n  fun onProjectTrusted(project: com.intellij.openapi.project.Project) {}\n  fun onProjectUntrusted(project: com.intellij.openapi.project.Project) {}\n  fun onProjectTrustedFromNotification(project: com.intellij.openapi.project.Project) {}\n  companion object { @JvmField val TOPIC: com.intellij.util.messages.Topic<TrustedProjectsListener> = com.intellij.util.messages.Topic() }\n}\n",
    "stubs4.kt": "package com.intellij.openapi.startup\ninterface ProjectActivity { suspend fun execute(project: com.intellij.openapi.project.Project) }\n",
}


def main(out):
    # The plugin UI and session glue's APIs live in their own module (new classes, extra members).
    import intellij_ui_stubs
    intellij_ui_stubs.extend(JAVA, KOTLIN)
    # The editor tools, add-to-prompt, health and log glue's APIs.
    import intellij_editor_stubs
    intellij_editor_stubs.extend(JAVA, KOTLIN)
    for fq, body in JAVA.items():
        pkg, cls = fq.rsplit(".", 1)
        d = os.path.join(out, *pkg.split("."))
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, cls + ".java"), "w") as f:
            f.write("package %s;\n%s\n" % (pkg, body))
    os.makedirs(os.path.join(out, "kt"), exist_ok=True)
    for name, text in KOTLIN.items():
        with open(os.path.join(out, "kt", name), "w") as f:
            f.write(text)


if __name__ == "__main__":
    main(sys.argv[1])
