package io.github.krabka.remotestorage.kafka;

import java.io.StringWriter;
import org.apache.logging.log4j.Level;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.core.LoggerContext;
import org.apache.logging.log4j.core.appender.WriterAppender;
import org.apache.logging.log4j.core.config.Configuration;
import org.apache.logging.log4j.core.config.LoggerConfig;
import org.apache.logging.log4j.core.layout.PatternLayout;

/** Every line the plugin and its child log while open, at INFO and above: "logger level message". */
final class LogCapture implements AutoCloseable {
    private static final String LOGGER = "io.github.krabka.remotestorage";
    private final StringWriter out = new StringWriter();
    private final WriterAppender appender;
    private final LoggerContext ctx;

    LogCapture() {
        ctx = (LoggerContext) LogManager.getContext(false);
        appender = WriterAppender.newBuilder().setName("capture-" + System.nanoTime()).setTarget(out)
            .setLayout(PatternLayout.newBuilder().withPattern("%c %p %m%n").build()).build();
        appender.start();
        Configuration config = ctx.getConfiguration();
        config.addAppender(appender);
        LoggerConfig lc = config.getLoggerConfig(LOGGER);
        lc.addAppender(appender, Level.INFO, null);
        ctx.updateLoggers();
    }

    synchronized String text() {
        out.flush();
        return out.toString();
    }

    @Override
    public void close() {
        ctx.getConfiguration().getLoggerConfig(LOGGER).removeAppender(appender.getName());
        ctx.updateLoggers();
        appender.stop();
    }
}
