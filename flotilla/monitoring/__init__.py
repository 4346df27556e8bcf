"""The dashboards and alerts Flotilla ships (monitoring/, and the chart's copies of them)."""
