package io.github.krabka.remotestorage.kafka;

import java.io.IOException;
import java.io.InputStream;
import java.util.Properties;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The Kafka lines the plugin is tested on (docs/KAFKA.md, "Kafka lines"):
 * 3.9 to 4.4. A broker of another line still loads the plugin; configure
 * logs one line naming its version and this range.
 */
final class KafkaLines {
    static final int[] OLDEST = {3, 9};
    static final int[] NEWEST = {4, 4};
    static final String RANGE = "3.9 to 4.4";

    private static final Pattern MAJOR_MINOR = Pattern.compile("^(\\d+)\\.(\\d+)");

    private KafkaLines() {
    }

    /**
     * The Kafka version of the classes the plugin runs with (the broker's),
     * from kafka-clients' kafka/kafka-version.properties, which every line
     * carries (AppInfoParser, which reads it, moved package in 4.x);
     * "unknown" when it cannot be read.
     */
    static String running() {
        try (InputStream in = org.apache.kafka.common.KafkaException.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            if (in == null) {
                return "unknown";
            }
            Properties p = new Properties();
            p.load(in);
            return p.getProperty("version", "unknown").trim();
        } catch (IOException e) {
            return "unknown";
        }
    }

    /** Whether version (as AppInfoParser gives it, e.g. "4.4.0") is of a tested line; an unparsable one is not. */
    static boolean tested(String version) {
        Matcher m = MAJOR_MINOR.matcher(version == null ? "" : version);
        if (!m.find()) {
            return false;
        }
        int major = Integer.parseInt(m.group(1));
        int minor = Integer.parseInt(m.group(2));
        return compare(major, minor, OLDEST) >= 0 && compare(major, minor, NEWEST) <= 0;
    }

    private static int compare(int major, int minor, int[] line) {
        return major != line[0] ? Integer.compare(major, line[0]) : Integer.compare(minor, line[1]);
    }
}
