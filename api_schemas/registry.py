"""Request and response bodies of Confluent's schema-registry API, as brokergate serves it.

Field names are Confluent's (camelCase where its registry uses it). ``schemaType`` is left out
of responses for AVRO, and ``references`` when there are none, as Confluent's registry does.
Unknown request fields (``metadata``, ``ruleSet``...) are accepted and ignored.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class SchemaReference(BaseModel):
    name: str = Field(
        min_length=1,
        description="The name the schema imports it by: an Avro full name, a "
        "JSON Schema $ref URL, a .proto import path.",
    )
    subject: str = Field(min_length=1)
    version: int = Field(
        description="A version of the subject, or -1 for its latest (made a number when stored)."
    )


class RegisterSchemaRequest(BaseModel):
    """A schema to register, look up, or check for compatibility."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    schema_: str | None = Field(
        None,
        alias="schema",
        description="The schema's text: Avro JSON, a JSON Schema, a .proto file (required).",
    )
    schemaType: str | None = Field(None, description="AVRO (the default), JSON or PROTOBUF.")
    references: list[SchemaReference] | None = None
    version: int | None = Field(None, description="Register as this version (it must be the next one).")
    id: int | None = Field(None, description="Refused: there is no import mode.")


class RegisterSchemaResponse(BaseModel):
    id: int = Field(description="The schema's id: the same for the same schema in every subject.")


class SchemaString(BaseModel):
    """A schema by id."""

    model_config = ConfigDict(populate_by_name=True)

    schema_: str = Field(alias="schema")
    schemaType: str | None = Field(None, description="Left out for AVRO.")
    references: list[SchemaReference] | None = Field(None, description="Left out when there are none.")
    subject: str | None = Field(None, description="With ?subject=: that subject, if it holds the schema.")
    version: int | None = Field(None, description="With ?subject=: the schema's version in that subject.")


class SubjectSchema(BaseModel):
    """A version of a subject with its schema."""

    model_config = ConfigDict(populate_by_name=True)

    subject: str
    version: int
    id: int
    schemaType: str | None = Field(None, description="Left out for AVRO.")
    references: list[SchemaReference] | None = Field(None, description="Left out when there are none.")
    schema_: str = Field(alias="schema")


class SubjectVersion(BaseModel):
    subject: str
    version: int


class CompatibilityCheckResponse(BaseModel):
    is_compatible: bool
    messages: list[str] | None = Field(None, description="With ?verbose=true: why not.")


class Config(BaseModel):
    compatibilityLevel: str = Field(
        description="NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD, "
        "FORWARD_TRANSITIVE, FULL or FULL_TRANSITIVE."
    )


class ConfigUpdateRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    compatibility: str | None = Field(None, description="The new level, any case (required).")


class Mode(BaseModel):
    mode: str = Field(description="READWRITE, or READONLY: writes refused (42205).")


class ModeUpdateRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    mode: str | None = Field(None, description="READWRITE or READONLY, any case (required).")
