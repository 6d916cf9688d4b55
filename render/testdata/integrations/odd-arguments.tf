# RabbitMQ resources for the cyrilgdn/rabbitmq Terraform provider, rendered
# by rmqtopo. Every vhost must exist.

resource "rabbitmq_exchange" "odd" {
  name  = "odd"
  vhost = "/"

  settings {
    type        = "topic"
    durable     = true
    auto_delete = false
    arguments = {
      "alternate-exchange" = "a$${b}%%{c}\"d\\e\nf\tg ключ \u0007"
    }
  }
}

resource "rabbitmq_queue" "odd_q" {
  name  = "odd.q"
  vhost = "/"

  settings {
    durable     = true
    auto_delete = false
    arguments_json = jsonencode({
      "x-bool"  = false
      "x-float" = 0.25
      "x-list"  = [1, "a", true, null, { "j" = "v", "k" = 2 }, []]
      "x-neg"   = -7
      "x-table" = {
        "k" = "v"
        "nested" = {
          "z" = 1.5
        }
        "y"    = {}
        "ключ" = 1
      }
    })
  }
}

resource "rabbitmq_binding" "amq_topic_to_odd_q__406f4ba4" {
  source           = "amq.topic"
  vhost            = "/"
  destination      = rabbitmq_queue.odd_q.name
  destination_type = "queue"
  routing_key      = "#"
}

resource "rabbitmq_binding" "odd_to_elsewhere__f787b9b9" {
  source           = rabbitmq_exchange.odd.name
  vhost            = "/"
  destination      = "elsewhere"
  destination_type = "exchange"
  routing_key      = "k"
}

resource "rabbitmq_policy" "odd" {
  name  = "odd"
  vhost = "/"

  policy {
    pattern  = "^odd$"
    priority = 1
    apply_to = "all"

    definition = {
      "alternate-exchange" = "odd"
      "max-length"         = 10
    }
  }
}
