import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Consumer load generator of `make bench` (kpo_bench): reads every partition of one topic
 * from its log start offset to its high watermark with a group-less consumer (assign, no
 * group.id, so no group coordinator is needed), then prints one line
 * "records=N bytes=B elapsed_ms=T" where T runs from the first poll to the last record.
 *
 * <p>Usage: KpoConsumePerf BOOTSTRAP TOPIC TIMEOUT_SECONDS [CONFIG_FILE]. CONFIG_FILE holds
 * further consumer properties (e.g. security.protocol=SASL_SSL and its settings, as a
 * --consumer.config file of Kafka's tools). Exits with 2 on timeout.
 */
public final class KpoConsumePerf {
  private KpoConsumePerf() {}

  public static void main(String[] args) throws IOException {
    if (args.length != 3 && args.length != 4) {
      System.err.println("usage: KpoConsumePerf BOOTSTRAP TOPIC TIMEOUT_SECONDS [CONFIG_FILE]");
      System.exit(64);
    }
    String topic = args[1];
    long timeoutNanos = Long.parseLong(args[2]) * 1_000_000_000L;
    Properties props = new Properties();
    if (args.length == 4) {
      try (InputStream in = new FileInputStream(args[3])) {
        props.load(in);
      }
    }
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "2000");
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
      List<TopicPartition> partitions = new ArrayList<>();
      for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofSeconds(30))) {
        partitions.add(new TopicPartition(topic, info.partition()));
      }
      consumer.assign(partitions);
      Map<TopicPartition, Long> start = consumer.beginningOffsets(partitions);
      Map<TopicPartition, Long> end = consumer.endOffsets(partitions);
      long expected = 0;
      for (TopicPartition tp : partitions) {
        expected += end.get(tp) - start.get(tp);
      }
      consumer.seekToBeginning(partitions);
      long records = 0;
      long bytes = 0;
      long began = System.nanoTime();
      while (records < expected) {
        if (System.nanoTime() - began > timeoutNanos) {
          System.err.println("timeout after " + records + " of " + expected + " records");
          System.exit(2);
        }
        ConsumerRecords<byte[], byte[]> batch = consumer.poll(Duration.ofMillis(500));
        for (ConsumerRecord<byte[], byte[]> record : batch) {
          records++;
          if (record.value() != null) {
            bytes += record.value().length;
          }
        }
      }
      long elapsedMs = (System.nanoTime() - began) / 1_000_000L;
      System.out.println("records=" + records + " bytes=" + bytes + " elapsed_ms=" + elapsedMs);
    }
  }
}
