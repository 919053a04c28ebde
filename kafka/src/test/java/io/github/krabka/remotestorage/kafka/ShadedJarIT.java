package io.github.krabka.remotestorage.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Path;
import java.util.List;
import java.util.jar.JarFile;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * The jar a broker loads child first: no class of Kafka (a second copy of
 * the interface fails with ClassCastException) and nothing of its own
 * dependencies outside the relocated package.
 */
class ShadedJarIT {
    private static final String NETTY = "io.github.krabka.remotestorage.kafka.shaded.io.grpc.netty.shaded.io.netty.";

    private static Path jar() {
        return Path.of(System.getProperty("rlmm.plugin.jar", "target/remotestorage-kafka-0.1.0.jar"));
    }

    /**
     * Netty loads its native transport and TLS from the jar, under the
     * names the relocation gives them (pom.xml, shade.native.prefix); on
     * another platform it would fall back to Java NIO and the JDK's TLS.
     */
    @Test
    void loadsNettysNativeLibraries() throws Exception {
        try (URLClassLoader loader = new URLClassLoader(new URL[] {jar().toUri().toURL()}, ClassLoader.getPlatformClassLoader())) {
            for (String name : List.of("channel.epoll.Epoll", "handler.ssl.OpenSsl")) {
                Class<?> c = Class.forName(NETTY + name, true, loader);
                Method available = c.getMethod("isAvailable");
                Method cause = c.getMethod("unavailabilityCause");
                assertTrue((Boolean) available.invoke(null), name + " is not available: " + cause.invoke(null));
            }
        }
    }

    @Test
    void carriesNoKafkaAndRelocatesTheRest() throws Exception {
        try (JarFile f = new JarFile(jar().toFile())) {
            List<String> classes = f.stream().map(e -> e.getName()).filter(n -> n.endsWith(".class")).collect(Collectors.toList());
            assertTrue(classes.contains("io/github/krabka/remotestorage/kafka/RlmmdRemoteLogMetadataManager.class"));
            List<String> outside = classes.stream()
                .filter(n -> !n.startsWith("io/github/krabka/remotestorage/"))
                .collect(Collectors.toList());
            assertEquals(List.of(), outside, "classes outside the plugin's packages");
        }
    }
}
