package dev.flotilla.clientcheck;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * A small Kafka client driven by Flotilla's interop tests. Every subcommand prints JSON lines on
 * stdout; diagnostics go to stderr; a non-zero exit code means failure.
 *
 * <pre>
 * produce        --bootstrap B --topic T [--compression none|gzip|snappy|lz4|zstd] [--acks 0|1|all]
 *                [--idempotent true|false] [--count N [--keys K] [--value-size S]]
 *                reads "key\tvalue" lines on stdin (or generates N records over K keys), prints one
 *                {"partition","offset","key","value"} per record, in input order
 * seek-epoch     --bootstrap B --topic T --offset O --epoch E [--offset-reset none|earliest]
 *                seeks partition 0 to O with leader epoch E (the consumer validates the position with
 *                OffsetForLeaderEpoch), polls; prints {"first_offset":N} or {"error":ExceptionClass}
 * transact       --bootstrap B --topic T --transactional-id ID --plan commit:N,abort:M,...
 *                [--partitions P] [--offsets-group G]   one transaction per step of the plan, its N
 *                records "ID-<step><c|a>-<i>" spread over partitions 0..P-1, then committed or aborted;
 *                with --offsets-group, each step also sends offset 10*(step+1) of partition 0 of T for
 *                G (sendOffsetsToTransaction); prints {"step","result","values":[...]} per step
 * consume        --bootstrap B --topic T [--group G] [--offset-reset earliest|latest] [--max N]
 *                [--timeout-ms MS] [--commit] [--isolation read_committed|read_uncommitted]   prints {"event":"assigned"|"revoked"|"record"|...};
 *                stdin commands: "commit" (commitSync of what was printed), "exit" or EOF (close;
 *                with --max, EOF is ignored and the tool stops after N records or the timeout)
 * list-topics    --bootstrap B                  prints {"topics":[...]}
 * describe-cluster --bootstrap B                prints {"clusterId","controller","nodes":[...]}
 * create-topic   --bootstrap B --topic T [--partitions P]  prints {"created":T,"partitions":P}
 * delete-topic   --bootstrap B --topic T        prints {"deleted":T}
 * create-partitions --bootstrap B --topic T --partitions TOTAL  prints {"topic":T,"partitions":TOTAL}
 * describe-configs  --bootstrap B --topic T     prints {"configs":{name:value,...}}
 * list-groups    --bootstrap B                  prints {"groups":[...]}
 * describe-group --bootstrap B --group G        prints {"group":G,"state":S,"members":N}
 * delete-group   --bootstrap B --group G        prints {"deleted":G}
 * round-trip     --bootstrap B --topic T --expect N [--timeout-ms MS]   one JVM for a secured
 *                listener's round trip: produces the values on stdin (one a line) to partition 0,
 *                prints {"event":"produced","offset"} each, then reads partition 0 from the start
 *                until N records, printing {"event":"record","offset","value"} each (exit 3: fewer)
 *
 * Every subcommand takes --config FILE: client properties (security.protocol, ssl.*, sasl.*)
 * applied on top of the subcommand's own.
 * </pre>
 */
public final class Main {
  private static final ObjectMapper JSON = new ObjectMapper();
  /** --config's properties, added to every client's. */
  private static final Properties EXTRA = new Properties();
  private static final PrintStream OUT =
      new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, StandardCharsets.UTF_8);

  private Main() {}

  public static void main(String[] argv) throws Exception {
    if (argv.length == 0) {
      System.err.println("usage: client-check produce|consume|list-topics|describe-cluster|create-topic --bootstrap B ...");
      System.exit(2);
    }
    Map<String, String> opts = parse(argv);
    String bootstrap = need(opts, "bootstrap");
    if (opts.containsKey("config")) {
      try (java.io.Reader r = java.nio.file.Files.newBufferedReader(java.nio.file.Path.of(opts.get("config")))) {
        EXTRA.load(r);
      }
    }
    int rc;
    switch (argv[0]) {
      case "produce" -> rc = produce(bootstrap, opts);
      case "consume" -> rc = consume(bootstrap, opts);
      case "transact" -> rc = transact(bootstrap, opts);
      case "seek-epoch" -> rc = seekEpoch(bootstrap, opts);
      case "list-topics" -> rc = listTopics(bootstrap);
      case "describe-cluster" -> rc = describeCluster(bootstrap);
      case "create-topic" -> rc = createTopic(bootstrap, opts);
      case "delete-topic" -> rc = deleteTopic(bootstrap, opts);
      case "create-partitions" -> rc = createPartitions(bootstrap, opts);
      case "describe-configs" -> rc = describeConfigs(bootstrap, opts);
      case "list-groups" -> rc = listGroups(bootstrap);
      case "describe-group" -> rc = describeGroup(bootstrap, opts);
      case "delete-group" -> rc = deleteGroup(bootstrap, opts);
      case "round-trip" -> rc = roundTrip(bootstrap, opts);
      default -> {
        System.err.println("unknown subcommand " + argv[0]);
        rc = 2;
      }
    }
    System.exit(rc);
  }

  private static Map<String, String> parse(String[] argv) {
    Map<String, String> opts = new HashMap<>();
    for (int i = 1; i < argv.length; i++) {
      String a = argv[i];
      if (!a.startsWith("--")) {
        throw new IllegalArgumentException("unexpected argument " + a);
      }
      String key = a.substring(2);
      if (i + 1 < argv.length && !argv[i + 1].startsWith("--")) {
        opts.put(key, argv[++i]);
      } else {
        opts.put(key, "true");
      }
    }
    return opts;
  }

  private static String need(Map<String, String> opts, String key) {
    String v = opts.get(key);
    if (v == null) {
      throw new IllegalArgumentException("missing --" + key);
    }
    return v;
  }

  private static void emit(ObjectNode node) {
    OUT.println(node.toString());
  }

  private static String str(byte[] b) {
    return b == null ? null : new String(b, StandardCharsets.UTF_8);
  }

  // ---------------------------------------------------------------------------------------------

  private static int produce(String bootstrap, Map<String, String> opts) throws Exception {
    String topic = need(opts, "topic");
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, opts.getOrDefault("compression", "none"));
    p.put(ProducerConfig.ACKS_CONFIG, opts.getOrDefault("acks", "all"));
    boolean idempotent = Boolean.parseBoolean(opts.getOrDefault("idempotent", "false"));
    p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, Boolean.toString(idempotent));
    // Without idempotence only one request in flight keeps per-key order across retries.
    p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, idempotent ? "5" : "1");
    p.put(ProducerConfig.LINGER_MS_CONFIG, opts.getOrDefault("linger-ms", "5"));
    p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, opts.getOrDefault("delivery-timeout-ms", "30000"));
    p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
    p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000");
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.putAll(EXTRA);

    List<String[]> input = new ArrayList<>();
    if (opts.containsKey("count")) {
      // Generated records: key-(i % keys), value-i padded to --value-size characters.
      int count = Integer.parseInt(opts.get("count"));
      int keys = Integer.parseInt(opts.getOrDefault("keys", "10"));
      int size = Integer.parseInt(opts.getOrDefault("value-size", "0"));
      for (int i = 0; i < count; i++) {
        StringBuilder v = new StringBuilder("value-").append(i);
        while (v.length() < size) {
          v.append('x');
        }
        input.add(new String[] {"key-" + (i % keys), v.toString()});
      }
    } else {
      try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
        String line;
        while ((line = in.readLine()) != null) {
          int tab = line.indexOf('\t');
          input.add(tab < 0 ? new String[] {null, line} : new String[] {line.substring(0, tab), line.substring(tab + 1)});
        }
      }
    }
    List<Future<RecordMetadata>> futures = new ArrayList<>();
    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
      for (String[] kv : input) {
        byte[] key = kv[0] == null ? null : kv[0].getBytes(StandardCharsets.UTF_8);
        futures.add(producer.send(new ProducerRecord<>(topic, key, kv[1].getBytes(StandardCharsets.UTF_8))));
      }
      producer.flush();
      for (int i = 0; i < futures.size(); i++) {
        RecordMetadata md = futures.get(i).get(30, TimeUnit.SECONDS);
        ObjectNode n = JSON.createObjectNode();
        n.put("partition", md.partition());
        n.put("offset", md.offset());
        n.put("key", input.get(i)[0]);
        n.put("value", input.get(i)[1]);
        emit(n);
      }
    }
    return 0;
  }

  // ---------------------------------------------------------------------------------------------

  /** A transactional producer following a plan of committed and aborted transactions. */
  private static int transact(String bootstrap, Map<String, String> opts) throws Exception {
    String topic = need(opts, "topic");
    String id = need(opts, "transactional-id");
    int partitions = Integer.parseInt(opts.getOrDefault("partitions", "1"));
    String offsetsGroup = opts.get("offsets-group");
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, id);
    p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "60000");
    p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
    p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "60000");
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.putAll(EXTRA);
    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
      producer.initTransactions();
      String[] steps = need(opts, "plan").split(",");
      for (int step = 0; step < steps.length; step++) {
        String[] kv = steps[step].split(":");
        boolean commit = kv[0].equals("commit");
        if (!commit && !kv[0].equals("abort")) {
          throw new IllegalArgumentException("plan step " + steps[step] + ": commit:N or abort:N");
        }
        int count = Integer.parseInt(kv[1]);
        producer.beginTransaction();
        ObjectNode n = JSON.createObjectNode();
        ArrayNode values = n.putArray("values");
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        for (int i = 0; i < count; i++) {
          String v = id + "-" + step + (commit ? "c" : "a") + "-" + i;
          sent.add(producer.send(new ProducerRecord<>(topic, i % partitions, null, v.getBytes(StandardCharsets.UTF_8))));
          values.add(v);
        }
        producer.flush();
        for (Future<RecordMetadata> f : sent) {
          f.get(30, TimeUnit.SECONDS);  // written (undecided) before the transaction ends
        }
        if (offsetsGroup != null) {
          producer.sendOffsetsToTransaction(
              Map.of(new TopicPartition(topic, 0), new org.apache.kafka.clients.consumer.OffsetAndMetadata(10L * (step + 1))),
              new org.apache.kafka.clients.consumer.ConsumerGroupMetadata(offsetsGroup));
        }
        if (commit) {
          producer.commitTransaction();
        } else {
          producer.abortTransaction();
        }
        n.put("step", step);
        n.put("result", commit ? "commit" : "abort");
        emit(n);
      }
    }
    return 0;
  }

  private static int seekEpoch(String bootstrap, Map<String, String> opts) {
    TopicPartition tp = new TopicPartition(need(opts, "topic"), 0);
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, opts.getOrDefault("offset-reset", "none"));
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.putAll(EXTRA);
    ObjectNode out = JSON.createObjectNode();
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
      consumer.assign(List.of(tp));
      consumer.seek(tp, new org.apache.kafka.clients.consumer.OffsetAndMetadata(
          Long.parseLong(need(opts, "offset")), java.util.Optional.of(Integer.parseInt(need(opts, "epoch"))), ""));
      long deadline = System.currentTimeMillis() + 20000;
      while (System.currentTimeMillis() < deadline) {
        var records = consumer.poll(Duration.ofMillis(500));
        if (!records.isEmpty()) {
          out.put("first_offset", records.iterator().next().offset());
          break;
        }
      }
    } catch (RuntimeException e) {
      out.put("error", e.getClass().getSimpleName());
    }
    emit(out);
    return 0;
  }

  private static int consume(String bootstrap, Map<String, String> opts) throws Exception {
    String topic = need(opts, "topic");
    String group = opts.get("group");
    String reset = opts.getOrDefault("offset-reset", "earliest");
    long max = Long.parseLong(opts.getOrDefault("max", "-1"));
    long timeoutMs = Long.parseLong(opts.getOrDefault("timeout-ms", "60000"));
    boolean commitAtEnd = opts.containsKey("commit");

    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, reset);
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
    p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
    p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
    p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, opts.getOrDefault("isolation", "read_uncommitted"));
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.putAll(EXTRA);
    if (group != null) {
      p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    }

    ConcurrentLinkedQueue<String> commands = new ConcurrentLinkedQueue<>();
    Thread stdin = new Thread(() -> {
      try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
        String line;
        while ((line = in.readLine()) != null) {
          commands.add(line.trim());
        }
      } catch (Exception e) {
        // treat as EOF
      }
      commands.add("eof");
    }, "stdin");
    stdin.setDaemon(true);
    stdin.start();

    long deadline = System.currentTimeMillis() + timeoutMs;
    long seen = 0;
    Map<TopicPartition, Long> next = new HashMap<>();
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
      if (group != null) {
        consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
          @Override
          public void onPartitionsRevoked(Collection<TopicPartition> parts) {
            emit(partitionsEvent("revoked", parts, null));
          }

          @Override
          public void onPartitionsAssigned(Collection<TopicPartition> parts) {
            emit(partitionsEvent("assigned", parts, consumer));
            emitAssignment(consumer);
          }

          @Override
          public void onPartitionsLost(Collection<TopicPartition> parts) {
            emit(partitionsEvent("lost", parts, null));
          }
        });
      } else {
        List<TopicPartition> parts = new ArrayList<>();
        for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofSeconds(20))) {
          parts.add(new TopicPartition(topic, info.partition()));
        }
        consumer.assign(parts);
        if (reset.equals("latest")) {
          consumer.seekToEnd(parts);
        } else {
          consumer.seekToBeginning(parts);
        }
        emit(partitionsEvent("assigned", parts, consumer));
        emitAssignment(consumer);
      }
      boolean running = true;
      while (running && System.currentTimeMillis() < deadline) {
        String cmd;
        while ((cmd = commands.poll()) != null) {
          if (cmd.equals("commit")) {
            consumer.commitSync(toCommit(next), Duration.ofSeconds(15));
            ObjectNode n = JSON.createObjectNode();
            n.put("event", "committed");
            ObjectNode offs = n.putObject("offsets");
            next.forEach((tp, off) -> offs.put(Integer.toString(tp.partition()), off));
            emit(n);
          } else if (cmd.equals("exit") || (cmd.equals("eof") && max < 0)) {
            // With --max the consumer stops after N records, whatever stdin does.
            running = false;
          } else if (cmd.equals("assignment")) {
            emitAssignment(consumer);
          }
        }
        if (!running) {
          break;
        }
        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(100))) {
          ObjectNode n = JSON.createObjectNode();
          n.put("event", "record");
          n.put("partition", r.partition());
          n.put("offset", r.offset());
          n.put("key", str(r.key()));
          n.put("value", str(r.value()));
          emit(n);
          next.put(new TopicPartition(r.topic(), r.partition()), r.offset() + 1);
          seen++;
          if (max >= 0 && seen >= max) {
            running = false;
            break;
          }
        }
      }
      if (commitAtEnd && group != null && !next.isEmpty()) {
        consumer.commitSync(toCommit(next), Duration.ofSeconds(15));
        ObjectNode n = JSON.createObjectNode();
        n.put("event", "committed");
        ObjectNode offs = n.putObject("offsets");
        next.forEach((tp, off) -> offs.put(Integer.toString(tp.partition()), off));
        emit(n);
      }
    }
    ObjectNode n = JSON.createObjectNode();
    n.put("event", "closed");
    n.put("records", seen);
    emit(n);
    return (max >= 0 && seen < max) ? 3 : 0;
  }

  private static int roundTrip(String bootstrap, Map<String, String> opts) throws Exception {
    String topic = need(opts, "topic");
    long expect = Long.parseLong(need(opts, "expect"));
    long timeoutMs = Long.parseLong(opts.getOrDefault("timeout-ms", "30000"));
    Properties pp = new Properties();
    pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    pp.put(ProducerConfig.ACKS_CONFIG, "all");
    pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000");
    pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    pp.putAll(EXTRA);
    List<Future<RecordMetadata>> sent = new ArrayList<>();
    try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
         KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
      String line;
      while ((line = in.readLine()) != null) {
        sent.add(producer.send(new ProducerRecord<>(topic, 0, null, line.getBytes(StandardCharsets.UTF_8))));
      }
      producer.flush();
      for (Future<RecordMetadata> f : sent) {
        ObjectNode n = JSON.createObjectNode();
        n.put("event", "produced");
        n.put("offset", f.get(30, TimeUnit.SECONDS).offset());
        emit(n);
      }
    }
    Properties cp = new Properties();
    cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    cp.putAll(EXTRA);
    long seen = 0;
    long deadline = System.currentTimeMillis() + timeoutMs;
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp)) {
      TopicPartition tp = new TopicPartition(topic, 0);
      consumer.assign(List.of(tp));
      consumer.seekToBeginning(List.of(tp));
      while (seen < expect && System.currentTimeMillis() < deadline) {
        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
          ObjectNode n = JSON.createObjectNode();
          n.put("event", "record");
          n.put("offset", r.offset());
          n.put("value", str(r.value()));
          emit(n);
          seen++;
        }
      }
    }
    return seen < expect ? 3 : 0;
  }

  private static Map<TopicPartition, org.apache.kafka.clients.consumer.OffsetAndMetadata> toCommit(
      Map<TopicPartition, Long> next) {
    Map<TopicPartition, org.apache.kafka.clients.consumer.OffsetAndMetadata> m = new HashMap<>();
    next.forEach((tp, off) -> m.put(tp, new org.apache.kafka.clients.consumer.OffsetAndMetadata(off)));
    return m;
  }

  private static ObjectNode partitionsEvent(
      String event, Collection<TopicPartition> parts, KafkaConsumer<byte[], byte[]> consumer) {
    ObjectNode n = JSON.createObjectNode();
    n.put("event", event);
    ArrayNode a = n.putArray("partitions");
    TreeSet<Integer> sorted = new TreeSet<>();
    parts.forEach(tp -> sorted.add(tp.partition()));
    sorted.forEach(a::add);
    if (consumer != null) {
      ObjectNode pos = n.putObject("positions");
      for (TopicPartition tp : parts) {
        pos.put(Integer.toString(tp.partition()), consumer.position(tp, Duration.ofSeconds(15)));
      }
    }
    return n;
  }

  private static void emitAssignment(KafkaConsumer<byte[], byte[]> consumer) {
    ObjectNode n = JSON.createObjectNode();
    n.put("event", "assignment");
    ArrayNode a = n.putArray("partitions");
    TreeSet<Integer> sorted = new TreeSet<>();
    consumer.assignment().forEach(tp -> sorted.add(tp.partition()));
    sorted.forEach(a::add);
    emit(n);
  }

  // ---------------------------------------------------------------------------------------------

  private static Admin admin(String bootstrap) {
    Properties p = new Properties();
    p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
    p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
    p.putAll(EXTRA);
    return Admin.create(p);
  }

  private static int listTopics(String bootstrap) throws Exception {
    try (Admin admin = admin(bootstrap)) {
      ObjectNode n = JSON.createObjectNode();
      ArrayNode a = n.putArray("topics");
      new TreeSet<>(admin.listTopics().names().get(30, TimeUnit.SECONDS)).forEach(a::add);
      emit(n);
    }
    return 0;
  }

  private static int describeCluster(String bootstrap) throws Exception {
    try (Admin admin = admin(bootstrap)) {
      DescribeClusterResult r = admin.describeCluster();
      ObjectNode n = JSON.createObjectNode();
      n.put("clusterId", r.clusterId().get(30, TimeUnit.SECONDS));
      Node controller = r.controller().get(30, TimeUnit.SECONDS);
      n.put("controller", controller == null ? -1 : controller.id());
      ArrayNode nodes = n.putArray("nodes");
      for (Node node : r.nodes().get(30, TimeUnit.SECONDS)) {
        ObjectNode o = nodes.addObject();
        o.put("id", node.id());
        o.put("host", node.host());
        o.put("port", node.port());
      }
      emit(n);
    }
    return 0;
  }

  private static int createTopic(String bootstrap, Map<String, String> opts) throws Exception {
    String topic = need(opts, "topic");
    int partitions = Integer.parseInt(opts.getOrDefault("partitions", "1"));
    try (Admin admin = admin(bootstrap)) {
      admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get(30, TimeUnit.SECONDS);
      ObjectNode n = JSON.createObjectNode();
      n.put("created", topic);
      n.put("partitions", partitions);
      emit(n);
    }
    return 0;
  }

  private static int deleteTopic(String bootstrap, Map<String, String> opts) throws Exception {
    String topic = need(opts, "topic");
    try (Admin admin = admin(bootstrap)) {
      admin.deleteTopics(List.of(topic)).all().get(30, TimeUnit.SECONDS);
      ObjectNode n = JSON.createObjectNode();
      n.put("deleted", topic);
      emit(n);
    }
    return 0;
  }

  private static int createPartitions(String bootstrap, Map<String, String> opts) throws Exception {
    String topic = need(opts, "topic");
    int total = Integer.parseInt(need(opts, "partitions"));
    try (Admin admin = admin(bootstrap)) {
      admin.createPartitions(Map.of(topic, org.apache.kafka.clients.admin.NewPartitions.increaseTo(total)))
          .all().get(30, TimeUnit.SECONDS);
      ObjectNode n = JSON.createObjectNode();
      n.put("topic", topic);
      n.put("partitions", total);
      emit(n);
    }
    return 0;
  }

  private static int describeConfigs(String bootstrap, Map<String, String> opts) throws Exception {
    String topic = need(opts, "topic");
    org.apache.kafka.common.config.ConfigResource res =
        new org.apache.kafka.common.config.ConfigResource(org.apache.kafka.common.config.ConfigResource.Type.TOPIC, topic);
    try (Admin admin = admin(bootstrap)) {
      org.apache.kafka.clients.admin.Config config =
          admin.describeConfigs(List.of(res)).all().get(30, TimeUnit.SECONDS).get(res);
      ObjectNode n = JSON.createObjectNode();
      ObjectNode c = n.putObject("configs");
      for (org.apache.kafka.clients.admin.ConfigEntry e : config.entries()) {
        c.put(e.name(), e.value());
      }
      emit(n);
    }
    return 0;
  }

  private static int listGroups(String bootstrap) throws Exception {
    try (Admin admin = admin(bootstrap)) {
      ObjectNode n = JSON.createObjectNode();
      ArrayNode a = n.putArray("groups");
      TreeSet<String> ids = new TreeSet<>();
      admin.listConsumerGroups().all().get(30, TimeUnit.SECONDS).forEach(g -> ids.add(g.groupId()));
      ids.forEach(a::add);
      emit(n);
    }
    return 0;
  }

  @SuppressWarnings("deprecation")
  private static int describeGroup(String bootstrap, Map<String, String> opts) throws Exception {
    String group = need(opts, "group");
    try (Admin admin = admin(bootstrap)) {
      org.apache.kafka.clients.admin.ConsumerGroupDescription d =
          admin.describeConsumerGroups(List.of(group)).all().get(30, TimeUnit.SECONDS).get(group);
      ObjectNode n = JSON.createObjectNode();
      n.put("group", d.groupId());
      n.put("state", d.state().toString());
      n.put("members", d.members().size());
      emit(n);
    }
    return 0;
  }

  private static int deleteGroup(String bootstrap, Map<String, String> opts) throws Exception {
    String group = need(opts, "group");
    try (Admin admin = admin(bootstrap)) {
      admin.deleteConsumerGroups(List.of(group)).all().get(30, TimeUnit.SECONDS);
      ObjectNode n = JSON.createObjectNode();
      n.put("deleted", group);
      emit(n);
    }
    return 0;
  }
}
