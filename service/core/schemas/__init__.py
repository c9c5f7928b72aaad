"""Schemas: Avro, JSON Schema and Protobuf, their compatibility rules and codecs, and the wire format."""
