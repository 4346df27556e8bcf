"""The load generators: librdkafka, raw wire and Kafka's Java perf tools, each run as a child process
(`python -m bench.clients.<module>`) so that the harness never shares an interpreter with the client
it times; a client answers with one JSON line (`child_answer`)."""
