# RabbitMQ resources for the cyrilgdn/rabbitmq Terraform provider, rendered
# by rmqtopo. Every vhost must exist.

resource "rabbitmq_exchange" "billing__75558fab" {
  name  = "!!!"
  vhost = "billing"

  settings {
    type        = "fanout"
    durable     = true
    auto_delete = false
  }
}

resource "rabbitmq_exchange" "billing_In_Box__76739e3a" {
  name  = "In_Box"
  vhost = "billing"

  settings {
    type        = "headers"
    durable     = true
    auto_delete = false
    arguments = {
      "alternate-exchange" = "!!!"
    }
  }
}

resource "rabbitmq_exchange" "billing_Invoices_Due_dlx__63119290" {
  name  = "Invoices_Due.dlx"
  vhost = "billing"

  settings {
    type        = "fanout"
    durable     = true
    auto_delete = false
  }
}

resource "rabbitmq_exchange" "billing_Invoices_Due_retry__aa449627" {
  name  = "Invoices_Due.retry"
  vhost = "billing"

  settings {
    type        = "headers"
    durable     = true
    auto_delete = false
  }
}

resource "rabbitmq_exchange" "billing_Ledger_Archive_dlx__db4900d6" {
  name  = "Ledger Archive.dlx"
  vhost = "billing"

  settings {
    type        = "fanout"
    durable     = true
    auto_delete = false
  }
}

resource "rabbitmq_exchange" "billing_Ledger_Archive_retry__55bb1daa" {
  name  = "Ledger Archive.retry"
  vhost = "billing"

  settings {
    type        = "headers"
    durable     = true
    auto_delete = false
  }
}

resource "rabbitmq_queue" "billing_Invoices_Due__329914ed" {
  name  = "Invoices_Due"
  vhost = "billing"

  settings {
    durable     = true
    auto_delete = false
    arguments_json = jsonencode({
      "x-dead-letter-exchange" = "Invoices_Due.dlx"
      "x-dead-letter-strategy" = "at-least-once"
      "x-delivery-limit"       = 20
      "x-overflow"             = "reject-publish"
      "x-queue-type"           = "quorum"
    })
  }
}

resource "rabbitmq_queue" "billing_Invoices_Due_dlq__63e201b2" {
  name  = "Invoices_Due.dlq"
  vhost = "billing"

  settings {
    durable     = true
    auto_delete = false
    arguments_json = jsonencode({
      "x-delivery-limit" = 1000000
      "x-queue-type"     = "quorum"
    })
  }
}

resource "rabbitmq_queue" "billing_Ledger_Archive__655549b9" {
  name  = "Ledger Archive"
  vhost = "billing"

  settings {
    durable     = true
    auto_delete = false
    arguments_json = jsonencode({
      "x-dead-letter-exchange" = "Ledger Archive.dlx"
    })
  }
}

resource "rabbitmq_queue" "billing_Ledger_Archive_dlq__7a805b3f" {
  name  = "Ledger Archive.dlq"
  vhost = "billing"

  settings {
    durable     = true
    auto_delete = false
  }
}

resource "rabbitmq_queue" "billing_rmqtopo_wait_1s__682cd5ae" {
  name  = "rmqtopo.wait.1s"
  vhost = "billing"

  settings {
    durable     = true
    auto_delete = false
    arguments_json = jsonencode({
      "x-dead-letter-exchange" = ""
      "x-dead-letter-strategy" = "at-least-once"
      "x-delivery-limit"       = 20
      "x-message-ttl"          = 1000
      "x-overflow"             = "reject-publish"
      "x-queue-type"           = "quorum"
    })
  }
}

resource "rabbitmq_binding" "In_Box_to_Invoices_Due__d448aa6d" {
  source           = rabbitmq_exchange.billing_In_Box__76739e3a.name
  vhost            = "billing"
  destination      = rabbitmq_queue.billing_Invoices_Due__329914ed.name
  destination_type = "queue"
  routing_key      = ""
  arguments_json = jsonencode({
    "a"       = "1"
    "b"       = 2
    "x-match" = "any"
  })
}

resource "rabbitmq_binding" "Invoices_Due_dlx_to_Invoices_Due_dlq__cd2951b0" {
  source           = rabbitmq_exchange.billing_Invoices_Due_dlx__63119290.name
  vhost            = "billing"
  destination      = rabbitmq_queue.billing_Invoices_Due_dlq__63e201b2.name
  destination_type = "queue"
  routing_key      = ""
}

resource "rabbitmq_binding" "Invoices_Due_retry_to_rmqtopo_wait_1s__b2855c2a" {
  source           = rabbitmq_exchange.billing_Invoices_Due_retry__aa449627.name
  vhost            = "billing"
  destination      = rabbitmq_queue.billing_rmqtopo_wait_1s__682cd5ae.name
  destination_type = "queue"
  routing_key      = ""
  arguments_json = jsonencode({
    "rmqtopo-attempt" = "2"
    "x-match"         = "all"
  })
}

resource "rabbitmq_binding" "Ledger_Archive_dlx_to_Ledger_Archive_dlq__2ef98099" {
  source           = rabbitmq_exchange.billing_Ledger_Archive_dlx__db4900d6.name
  vhost            = "billing"
  destination      = rabbitmq_queue.billing_Ledger_Archive_dlq__7a805b3f.name
  destination_type = "queue"
  routing_key      = ""
}

resource "rabbitmq_policy" "billing_cap__ebda6eda" {
  name  = "cap"
  vhost = "billing"

  policy {
    pattern  = "^Invoices"
    priority = -3
    apply_to = "queues"

    definition = {
      "max-length" = 9
      "overflow"   = "reject-publish"
    }
  }
}

resource "rabbitmq_policy" "billing_empty__e0fff20b" {
  name  = "empty"
  vhost = "billing"

  policy {
    pattern  = "^x$"
    priority = 0
    apply_to = "exchanges"

    definition = {
      "alternate-exchange" = "!!!"
    }
  }
}
