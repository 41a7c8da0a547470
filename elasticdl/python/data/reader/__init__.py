"""ElasticDL v0.2's data readers: `RecordIODataReader` over this project's RecordIO files."""
