package io.github.krabka.remotestorage.kafka;

/**
 * The embedded rlmmd of one broker, as JMX shows it:
 * {@code io.github.krabka.remotestorage:type=EmbeddedRlmmd,broker=<broker.id>}.
 */
public interface EmbeddedRlmmdMXBean {
    /** How many times the plugin started the child again after it exited or stopped answering. */
    long getRestarts();

    /** STARTING, WAITING_FOR_DATABASE, SERVING, EXITED, UNRESPONSIVE or CLOSED. */
    String getState();

    /** The running child's process id; -1 when none runs. */
    long getPid();

    /** The state in words, with the child's last warning or error: what calls fail with while it does not serve. */
    String getDescription();
}
