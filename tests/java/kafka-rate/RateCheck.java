// Kafka's own Rate (kafka-clients), or its SimpleRate with the argument "simple" (what replication
// throttles measure with), fed "<time ms> <value> <samples> <window ms>" lines on stdin;
// prints "<rate after recording> <window size ms>" per line. tests/unit/broker/test_quota_stats_vs_kafka.py
// compares Flotilla's quota_stats with it. Run: java -cp kafka-clients.jar RateCheck.java [simple]
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.common.metrics.MetricConfig;
import org.apache.kafka.common.metrics.stats.Rate;
import org.apache.kafka.common.metrics.stats.SimpleRate;

public class RateCheck {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        Rate rate = args.length > 0 && args[0].equals("simple") ? new SimpleRate() : new Rate();
        MetricConfig config = null;
        String line;
        while ((line = in.readLine()) != null) {
            String[] p = line.trim().split(" ");
            long now = Long.parseLong(p[0]);
            double value = Double.parseDouble(p[1]);
            if (config == null) {
                config = new MetricConfig().samples(Integer.parseInt(p[2])).timeWindow(Long.parseLong(p[3]), TimeUnit.MILLISECONDS);
            }
            rate.record(config, value, now);
            System.out.println(rate.measure(config, now) + " " + rate.windowSize(config, now));
        }
    }
}
